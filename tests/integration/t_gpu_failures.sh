#!/bin/bash
# Every injected CUPTI failure turns GPU sampling off with a named reason;
# the app keeps running and exits 0, no PC batches, CPU sampling unaffected.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

# fail-mode  enum gs_gpu_reason  text the message must contain
cases="privileges:3:CAP_SYS_ADMIN
busy:5:DCGM
subscribers:4:CUPTI for Kineto
enable_oom:8:out of memory
unsupported:6:does not support PC sampling
nodriver:11:could not reach the CUDA driver"
while IFS=: read -r mode reason text; do
	export FAKE_CUPTI_FAIL=$mode
	start_app 60 --rate 1000
	driver -n 1 -t 1
	wait_app
	grep -q "^status .*state=3 reason=$reason .*$text" "$T/driver.out" ||
		{ show; fail "$mode: no OFF status with reason $reason naming '$text'"; }
	[ "$(val batches)" = 0 ] || { show; fail "$mode: PC batches despite the failure"; }
	[ "$(val launches)" = 0 ] || { show; fail "$mode: launch events despite GPU sampling off"; }
	grep -q "^summary GPU: off" "$T/driver.out" || { show; fail "$mode: summary does not say off"; }
	grep -q "launches=" "$T/app.out" || fail "$mode: app did not finish its loop"
	echo "ok: $mode -> $(grep -m1 '^status .*state=3' "$T/driver.out" | sed 's/.*msg=//')"
done <<< "$cases"
ok "every injected failure degraded to GPU sampling off with its reason"
