#!/bin/bash
# gs-test-timeout: 90
# The buffer configured as SAMPLING_DATA_BUFFER is CUPTI's until a Disable
# succeeds: a context's teardown copies its remaining PC records into it
# ("this API does the PC Sampling tear-down, joins threads and copies PC
# records in the buffer provided during the PC sampling configuration",
# cupti_pcsampling.h:617-621; the CUPTI double does so after the
# DESTROY_STARTING callbacks).  Agent and CUPTI double built with
# AddressSanitizer, the job run with its runtime preloaded:
#  1. a job that exits while sampling, its contexts destroyed by the driver's
#     exit teardown after the agent's exit handler ran (FAKE_CUDA_EXIT_DESTROY);
#  2. two GPUs' contexts destroyed while the agent's lock is busy (every
#     GetData takes 1.5 s) and CUPTI's teardown takes 3.5 s (the agent reaps
#     them meanwhile).
# Neither may write the job's heap after free; the job exits 0.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
ASAN_AGENT=$FAKES/asan/libgpusample_agent.so
ASAN_CUPTI=$FAKES/asan/libcupti.so.13
[ -e "$ASAN_AGENT" ] && [ -e "$ASAN_CUPTI" ] || fail "ASan agent/double missing: run make BUILD=$BUILD test-helpers"
rt=$(ldd "$ASAN_AGENT" | awk '/asan/ { print $3; exit }')
[ -e "$rt" ] || fail "no ASan runtime found for $ASAN_AGENT"
export GS_AGENT_DEBUG=1 ASAN_OPTIONS=detect_leaks=0:halt_on_error=1

# leg NAME SECONDS_ATTACHED [gpu_app args]: the ASan job, the driver attached
# in the background; once the agent is armed the job is told to stop (and
# exits while sampling), the driver detaches after SECONDS_ATTACHED.
leg() {
	local name=$1 secs=$2; shift 2
	LD_PRELOAD=$rt CUDA_INJECTION64_PATH=$ASAN_AGENT GS_CUPTI_PATH=$ASAN_CUPTI \
		start_app 60 --rate 600 "$@"
	timeout 60 "$FAKES/gs_gpu_driver" -p "$APP" -n 1 -t "$secs" > "$T/driver.out" 2> "$T/driver.err" &
	local drv=$!
	for _ in $(seq 200); do grep -q 'state 1 reason' "$T/app.out" && break; sleep 0.05; done
	grep -q 'state 1 reason' "$T/app.out" || { cat "$T/app.out" "$T/driver.err"; fail "$name: agent did not arm"; }
	sleep 0.5
	touch "$T/app.stop"
	wait "$APP"; local rc=$?
	wait "$drv"
	if grep -q 'AddressSanitizer' "$T/app.out"; then
		grep -A30 'ERROR: AddressSanitizer' "$T/app.out" | head -40
		fail "$name: AddressSanitizer report in the job"
	fi
	[ $rc -eq 0 ] || { tail -30 "$T/app.out"; fail "$name: job exited $rc"; }
	grep -q 'configured buffer kept' "$T/app.out" || { tail -30 "$T/app.out"; fail "$name: the path under test was not taken"; }
	cp "$T/app.out" "$T/$name.out"
}

FAKE_CUDA_EXIT_DESTROY=1 leg exit 4 --keep-contexts
FAKE_CUDA_DEVICES=2 FAKE_CUPTI_GETDATA_MS=1500 FAKE_CUPTI_TEARDOWN_MS=3500 leg busy 14 --devices 2
[ "$(stat teardown_copies)" -ge 1 ] || { show; fail "the double's teardown never wrote the configured buffer"; }
ok "no write after free at exit nor after a busy-lock destroy ($(stat teardown_copies) teardown copies, $(stat teardown_pcs) PCs)"
