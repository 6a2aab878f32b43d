#!/bin/bash
# CUPTI is the user's while gpusample is not attached (issue 15 item 4).
# CUDA 13.0 allows one CUPTI subscriber per process, and the CUPTI double
# enforces it; the job (primary contexts, as the CUDA runtime) runs a
# torch.profiler/Kineto stand-in that subscribes as "Kineto" on request
# (gpu_app.py --kineto-dir):
#   1. agent dormant: Kineto subscribes and gets its callbacks
#   2. gpusample -p while Kineto holds CUPTI: "GPU sampling off" naming
#      "CUPTI for Kineto", the CPU profile is written, the job is unharmed
#   2b. Kineto lets go while gpusample is attached: the agent, asking every
#      second, arms; the report says CUPTI was held at first
#   3. Kineto gone: the agent subscribes, finds the primary context created
#      long before the attach (creating none) and samples it; Kineto asking
#      meanwhile is refused, with the agent named as the holder
#   4. detached: the agent unsubscribed, Kineto subscribes again
#   5. re-armed through gpusample -p: GPU samples again, and the report says
#      how many kernels have no source lines (modules loaded while dormant)
#   6. the multi-subscriber mode: documented in CUpti_SubscriberParams from
#      13.2, working from CUDA 13.3 with an r610+ driver (CUPTI Usage,
#      https://docs.nvidia.com/cupti/main/main.html, 2.4.1 Overview):
#      a. CUPTI 13.2 (130200): the agent does not ask for it, and Kineto
#         asking for it is refused while the agent is armed
#      b. CUPTI 13.3 (130300) on an r580 driver: the agent asks, CUPTI keeps
#         one subscriber, Kineto is refused
#      c. CUPTI 13.3 on an r610 driver: Kineto asking for it too subscribes
#         while the agent is armed, Kineto not asking for it is refused
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ -x "$GS" ] || fail "$GS not built: run make BUILD=$BUILD"
K=$T/kineto
mkdir -p "$K"

# kin ACTION [multi]: ask the stand-in; prints its answer line
kin() {
	local n
	n=$(cat "$K/log" 2>/dev/null | wc -l)
	echo "${2:-}" > "$K/$1"
	for _ in $(seq 600); do
		[ "$(cat "$K/log" 2>/dev/null | wc -l)" -gt "$n" ] && { tail -1 "$K/log"; return 0; }
		sleep 0.05
	done
	cat "$T/app.out"; fail "the Kineto stand-in did not answer '$1'"
}
expect() { # WHAT GOT WANTED_PREFIX
	case "$2" in "$3"*) echo "ok: $1: $2" ;; *) cat "$T/app.out"; fail "$1: got '$2', expected '$3...'" ;; esac
}

start_app 60 --rate 600 --primary --kineto-dir "$K"
# 1.
expect "Kineto, agent dormant" "$(kin sub)" "sub rc=0 "
sleep 0.3
# 2.
"$GS" -p "$APP" -d 2 -q -o "$T/held" --format pprof > "$T/held.out" 2>&1 || { cat "$T/held.out"; fail "gpusample -p failed"; }
kill -0 "$APP" 2>/dev/null || { cat "$T/app.out"; fail "the job died"; }
"$GS" report "$T/held.pb.gz" > "$T/held.report" 2>&1 || fail "gpusample report failed"
grep -q 'GPU sampling off: another CUPTI subscriber holds CUPTI: "CUPTI for Kineto"' "$T/held.report" ||
	{ cat "$T/held.out" "$T/held.report"; fail "the report does not name the subscriber holding CUPTI"; }
# the job mostly sleeps (1-3 CPU samples in 2 s; once none): the CPU
# profile is its wall time, on-CPU and off
grep -Eq 'main thread \(python3 pid '"$APP"'\): [0-9.]+ s of wall time' "$T/held.report" &&
	grep -q '^Verdict: ' "$T/held.report" ||
	{ cat "$T/held.out"; head -40 "$T/held.report"; fail "no CPU profile while CUPTI was held"; }
grep -m1 'CUPTI for Kineto' "$T/held.report"
r=$(kin unsub)
expect "Kineto unsubscribes" "$r" "unsub rc=0 "
[ "${r##*callbacks=}" -gt 0 ] || fail "Kineto got no callbacks while it held CUPTI"
# 2b. Kineto lets go while gpusample is attached (its profiler window
#     ends): the agent, asking every second, arms and samples
expect "Kineto, agent dormant" "$(kin sub)" "sub rc=0 "
"$GS" -p "$APP" -d 5 -q -o "$T/late" --format pprof > "$T/late.out" 2>&1 &
gsp=$!
expect "Kineto lets go once the agent was refused" "$(kin unsub_refused)" "unsub rc=0 "
wait "$gsp" || { cat "$T/late.out"; fail "gpusample -p (late) failed"; }
"$GS" report "$T/late.pb.gz" > "$T/late.report" 2>&1 || fail "gpusample report failed"
grep -Eq '[1-9][0-9]* GPU PC samples' "$T/late.report" || { cat "$T/late.report"; fail "no GPU samples once Kineto let go"; }
grep -q 'GPU sampling started late: "CUPTI for Kineto" held CUPTI' "$T/late.report" ||
	{ cat "$T/late.report"; fail "the report does not say that Kineto held CUPTI at first"; }
# 3.
driver -n 1 -t 3 &
drv=$!
expect "Kineto while the agent is armed" "$(kin sub_armed)" "sub rc=39 old=CUPTI_for_gpusample"
wait "$drv" || fail "gs_gpu_driver failed"
[ "$(val armed_status)" = 1 ] || { show; fail "agent did not arm"; }
grep -q '^status ctx=0 state=1 .*msg=armed: 1 of 1 contexts sampled' "$T/driver.out" ||
	{ show; fail "the primary context created before the attach was not armed at arm"; }
[ "$(val samples)" -gt 0 ] || { show; fail "no GPU samples"; }
# 4.
expect "Kineto after the detach" "$(kin sub)" "sub rc=0 "
expect "Kineto unsubscribes" "$(kin unsub)" "unsub rc=0 "
# 5.
"$GS" -p "$APP" -d 2 -q -o "$T/re" --format pprof > "$T/re.out" 2>&1 || { cat "$T/re.out"; fail "second gpusample -p failed"; }
"$GS" report "$T/re.pb.gz" > "$T/re.report" 2>&1 || fail "gpusample report failed"
grep -Eq '[1-9][0-9]* GPU PC samples' "$T/re.report" || { cat "$T/re.report"; fail "no GPU samples after re-arming"; }
grep -q 'kernels (2 cubins) have no source lines: their modules were loaded before gpusample attached' "$T/re.report" ||
	{ cat "$T/re.report"; fail "the report does not say which kernels lack lines and why"; }
grep -m1 'have no source lines' "$T/re.report"
wait_app
grep -q 'primary_created=1 ' "$T/app.out" || { cat "$T/app.out"; fail "the agent created a primary context"; }
for k in order_errors bad_size dead_ctx_calls; do
	[ "$(stat $k)" = 0 ] || { show; fail "CUPTI double: $k $(stat $k)"; }
done
[ "$(stat subscribe_ok.CUPTI_for_Kineto)" = 3 ] || { show; fail "Kineto subscribed $(stat subscribe_ok.CUPTI_for_Kineto) times, expected 3"; }

# 6.
# multi_leg VERSION DRIVER_BRANCH WANT_PLAIN WANT_MULTI ASKS
multi_leg() {
	rm -f "$K"/*
	export FAKE_CUPTI_VERSION=$1 FAKE_CUPTI_DRIVER=$2
	start_app 60 --rate 600 --primary --kineto-dir "$K"
	driver -n 1 -t 3 &
	drv=$!
	expect "Kineto without multi-subscriber mode ($1, r$2)" "$(kin sub_armed)" "$3"
	expect "Kineto with multi-subscriber mode ($1, r$2)" "$(kin sub_armed multi)" "$4"
	if [ "$4" = "sub rc=0 " ]; then
		sleep 0.3
		r=$(kin unsub)
		[ "${r##*callbacks=}" -gt 0 ] || fail "Kineto got no callbacks next to the armed agent"
	fi
	wait "$drv" || fail "gs_gpu_driver failed"
	if [ "$5" = asks ]; then
		grep -q '^status ctx=0 state=1 .*multi-subscriber mode requested' "$T/driver.out" ||
			{ show; fail "agent did not ask for the multi-subscriber mode on CUPTI $1"; }
	else
		grep -q 'multi-subscriber' "$T/driver.out" &&
			{ show; fail "agent asked for the multi-subscriber mode on CUPTI $1, which cannot give it"; }
	fi
	[ "$(val samples)" -gt 0 ] || { show; fail "no GPU samples (CUPTI $1, r$2)"; }
	wait_app
	[ "$(stat bad_size)" = 0 ] || fail "wrong CUpti_SubscriberParams size (CUPTI $1)"
}
refused="sub rc=39 old=CUPTI_for_gpusample"
multi_leg 130200 610 "$refused" "$refused" no     # a.
multi_leg 130300 580 "$refused" "$refused" asks   # b.
multi_leg 130300 610 "$refused" "sub rc=0 " asks  # c.
ok "Kineto subscribes while the agent is dormant, is refused while it is armed; gpusample names Kineto when it holds CUPTI and keeps the CPU profile; primary context found at arm; re-arm; multi-subscriber mode only from CUPTI 13.3 on an r610 driver"
