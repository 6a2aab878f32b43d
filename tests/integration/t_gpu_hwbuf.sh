#!/bin/bash
# gs-test-timeout: 60
# CUPTI's hardware buffer is device memory, 512 MB unless set
# (cupti_pcsampling.h:288-296), taken from the job's GPU mid-training.  The
# agent asks for 128 MB, at most a quarter of the free memory cuMemGetInfo
# reports, or what hwbuf= says, and reports the size CUPTI reads back.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

# leg FREE_MB WANT_BYTES [agent opts]
leg() {
	FAKE_CUDA_FREE_MB=$1 GS_AGENT_OPTS=$3 start_app 60 --rate 300
	driver -n 1 -t 0.8
	wait_app
	[ "$(stat hwbuf_bytes)" = "$2" ] || { show; fail "free $1 MB, opts '$3': hardware buffer $(stat hwbuf_bytes) bytes, expected $2"; }
	grep -q "armed: .*hardware buffer $(($2 >> 20)) MiB" "$T/driver.out" || { show; fail "read-back size not reported"; }
	[ "$(val samples)" -gt 0 ] || { show; fail "no samples"; }
}
leg 80000 $((128 << 20)) ""
leg 200 $((50 << 20)) ""
leg 200 $((64 << 20)) "hwbuf=$((64 << 20))"
ok "hardware buffer 128 MiB with 80 GB free, 50 MiB with 200 MB free, 64 MiB when asked"
