#!/bin/sh
# The checks of scripts/kernel-matrix.sh, run as the /init of each QEMU guest
# (busybox sh and awk) and natively for the "host" row, so that both rows come
# from the same code.  Prints machine-readable lines on stdout, each starting
# with "GSM " (the serial console mixes in kernel text, so the host side keeps
# only those):
#   GSM kernel RELEASE cpus N
#   GSM program NAME VERIFIED_INSNS      from `gpusample check`
#   GSM feature NAME yes|no              from `gpusample check`
#   GSM checkmsg TEXT                    any other line of `gpusample check`
#   GSM verifier TEXT                    the last lines of a failed load's verifier log
#   GSM check rc N
#   GSM chain|python|offcpu ok|fail|skip|na DETAIL
#   GSM log WHAT TEXT                    gpusample's stderr where a step failed
#   GSM done
# Environment: GS (gpusample), WL (dir with cpu_chain), PYWL (dir with
# py_chain.py and py_common.py), PY (python interpreter), OUT (scratch dir).
# POSIX sh only: busybox runs it in the guest.

: "${GS:?}" "${WL:?}" "${PYWL:?}" "${PY:?}" "${OUT:?}"
mkdir -p "$OUT"
# stamp STEP: seconds since boot (the guest's clock), to see where time goes.
stamp() { echo "GSM time $1 $(cut -d' ' -f1 /proc/uptime)"; }
echo "GSM kernel $(uname -r) cpus $(grep -c '^processor' /proc/cpuinfo)"

# log WHAT FILE: the last lines of FILE (gpusample's stderr), for the report.
log() { tail -n 6 "$2" 2>/dev/null | while IFS= read -r l; do echo "GSM log $1 $l"; done; }
# loadfail FILE: the one-line reason when FILE says the BPF programs did not load.
loadfail() { grep -m1 -i -E 'load(ing)?( the)? BPF|BPF program|verifier|libbpf' "$1" 2>/dev/null; }

stamp start
# (a) every program and feature, as `gpusample check` reports them.
# GS_DEBUG=1: libbpf's warnings, with the verifier's log where libbpf prints
# one (not while gpusample gives each program its own BPF_LOG_STATS buffer);
# only its last lines (where the verifier says why) go to the console, as
# "verifier", and of libbpf's other lines only its complaints.
GS_DEBUG=1 timeout -k 10 200 "$GS" check > "$OUT/check.out" 2>&1
rc=$?
supported=0
awk '/-- BEGIN PROG LOAD LOG --/ { inlog = 1; n = 0; next }
     /-- END PROG LOAD LOG --/ { inlog = 0; if (blocks++ < 3) for (i = n > 8 ? n - 7 : 1; i <= n; i++) print "\tverifier " buf[i]; next }
     inlog { buf[++n] = $0; next }
     /^libbpf: / && tolower($0) !~ /fail|error|refus|invalid|not supported|warn/ { next }
     { print }' "$OUT/check.out" > "$OUT/check.lines"
while IFS= read -r l; do
	case $l in
	"program "* | "feature "*) supported=1; echo "GSM $l" ;;
	"	verifier "*) echo "GSM ${l#?}" ;;
	"") ;;
	*) echo "GSM checkmsg $l" ;;
	esac
done < "$OUT/check.lines"
echo "GSM check rc $rc"
stamp check

profiles=1
if [ "$rc" -ne 0 ] && { [ "$supported" = 1 ] || [ "$rc" -ge 124 ] ||
	[ -n "$(loadfail "$OUT/check.out")" ]; }; then
	# The same programs would fail again in each profile run, each taking up
	# to a full verifier run (~50 s or more under TCG): the check's lines
	# say enough.  (A gpusample without `check` takes it for a command to
	# launch, and its load error is just as good.)
	case $rc in 124 | 137 | 143) echo "GSM checkmsg timed out after 200 s" ;; esac
	for w in chain python offcpu; do echo "GSM $w skip check failed"; done
	profiles=0
fi

# (b) the C chain main -> a -> b -> c: of the samples whose leaf user frame
# is c, the share with main;a;b right above it (folded stacks are root-first;
# kernel frames, "_[k]", sit after the user leaf).
if [ "$profiles" = 1 ]; then
	timeout -k 10 90 "$GS" -d 3 -o "$OUT/chain" --format folded,pprof -q -- "$WL/cpu_chain" 3 \
		> "$OUT/chain.stdout" 2> "$OUT/chain.err"
	rc=$?
	if [ "$rc" -ne 0 ] || [ ! -s "$OUT/chain.cpu.folded" ]; then
		why=$(loadfail "$OUT/chain.err")
		echo "GSM chain fail rc=$rc ${why:-no profile}"
		log chain "$OUT/chain.err"
		if [ -n "$why" ]; then
			for w in python offcpu; do echo "GSM $w skip BPF load failed"; done
			profiles=0
		fi
	else
		awk '{ n = $NF; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";")
		       while (k > 0 && f[k] ~ /_\[k\]$/) k--
		       if (k < 1 || f[k] != "c") next
		       inc += n
		       if (k >= 4 && f[k-1] == "b" && f[k-2] == "a" && f[k-3] == "main") full += n }
		     END { r = (inc >= 20 && full >= 0.9 * inc) ? "ok" : "fail"
		           printf "GSM chain %s %d/%d\n", r, full, inc }' "$OUT/chain.cpu.folded"
	fi
	stamp chain
fi

# (c) the Python chain <module> -> main -> Worker.run -> inner: of the samples
# with inner on the stack, the share whose Python frames ("NAME (FILE:LINE)")
# are exactly these, root first.
if [ "$profiles" = 1 ]; then
	GS_SECONDS=3 timeout -k 10 120 "$GS" -d 60 -o "$OUT/py" --format folded,pprof -q -- \
		"$PY" -S "$PYWL/py_chain.py" > "$OUT/py.stdout" 2> "$OUT/py.err"
	rc=$?
	if [ "$rc" -ne 0 ] || [ ! -s "$OUT/py.cpu.folded" ]; then
		why=$(loadfail "$OUT/py.err")
		echo "GSM python fail rc=$rc ${why:-no profile}"
		log python "$OUT/py.err"
	else
		awk '{ n = $NF; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";"); py = ""
		       for (i = 1; i <= k; i++) if (f[i] ~ / \([^()]*\.py(:[0-9]+)?\)$/) {
		           nm = f[i]; sub(/ \([^()]*\)$/, "", nm); py = py (py == "" ? "" : ";") nm }
		       if (py !~ /(^|;)inner$/) next
		       inl += n
		       if (py == "<module>;main;Worker.run;inner") exact += n
		       else if (!(py in seen)) { seen[py] = 1; other = py } }
		     END { r = (inl >= 20 && exact >= 0.9 * inl) ? "ok" : "fail"
		           printf "GSM python %s %d/%d%s\n", r, exact, inl, other == "" ? "" : " e.g. " other }' \
			"$OUT/py.cpu.folded"
	fi
	stamp python
fi

# (d) off-CPU time: a Python loop that sleeps; its waits show as "[blocked]
# WAIT" frames in the speedscope file (the folded file holds CPU samples only).
if [ "$profiles" = 1 ]; then
	timeout -k 10 90 "$GS" -d 60 -o "$OUT/off" --format speedscope,pprof -q -- "$PY" -S -c \
		'import time
for _ in range(20): time.sleep(0.05)' > "$OUT/off.stdout" 2> "$OUT/off.err"
	rc=$?
	blocked=$(grep -o '"\[blocked\][^"]*"' "$OUT/off.speedscope.json" 2>/dev/null | sort -u)
	if [ "$rc" -ne 0 ]; then
		echo "GSM offcpu fail rc=$rc $(loadfail "$OUT/off.err")"
		log offcpu "$OUT/off.err"
	elif echo "$blocked" | grep -q -i sleep; then
		# the loop's sleeps themselves, not only waits of the start-up
		echo "GSM offcpu ok $(echo "$blocked" | grep -c .) blocked frames, e.g. $(echo "$blocked" | grep -i -m1 sleep)"
	elif why=$(grep -m1 -i 'off-cpu' "$OUT/off.err"); then
		# gpusample said why it has no off-CPU data (a kernel without what
		# it needs): a known limit, not a failure.
		echo "GSM offcpu na $why"
	else
		echo "GSM offcpu fail no [blocked] frame of the sleep loop in the speedscope file: $(echo "$blocked" | head -n 4 | tr '\n' ' ')"
		log offcpu "$OUT/off.err"
	fi
	stamp offcpu
fi
echo "GSM done"
