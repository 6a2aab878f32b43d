#!/bin/bash
# gs-test-timeout: 60
# An agent attached to a running job (subscribe=arm) finalizes CUPTI at
# each detach, so that the job does not run on with an idle CUPTI: from the
# exit site of a kernel launch (a launch EXIT callback), where CUPTI Usage
# 2.3.5 wants cuptiFinalize called, after every context was disabled.  The
# next attach subscribes again ("You can attach and detach CUPTI any number
# of times") and samples: two sessions, each finalized.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

start_app 60 --rate 300
driver -n 2 -t 1 -g 0.7
sleep 0.3 # the job launches on after the last detach: its finalize
wait_app
show
[ "$(val armed_status)" = 2 ] || fail "expected 2 armed sessions"
[ "$(val unacked)" = 0 ] || fail "an agent did not acknowledge the detach"
[ "$(stat call.cuptiFinalize)" = 2 ] || fail "cuptiFinalize called $(stat call.cuptiFinalize) times, expected once per detach"
[ "$(stat finalize_at_exit_site)" = 2 ] || fail "cuptiFinalize not at a launch's exit site ($(stat finalize_elsewhere) elsewhere)"
[ "$(stat finalize_while_enabled)" = 0 ] || fail "cuptiFinalize with PC sampling still enabled"
[ "$(stat subscribe_after_finalize)" = 1 ] || fail "no subscribe after the first finalize"
[ "$(stat order_errors)" = 0 ] || fail "$(stat order_errors) calls out of order"
[ "$(grep -c 'ctx=1 state=1 .*context 1 on GPU 0 armed' "$T/driver.out")" = 2 ] || fail "the context was not armed again after the finalize"
gen=$(stat samples_delivered); got=$(val samples)
[ "${gen:-0}" -gt 0 ] && [ "$got" = "$gen" ] || fail "host got $got samples, CUPTI delivered $gen"
ok "2 detaches, 2 cuptiFinalize at a launch's exit, sampled again after the first: $got samples, all delivered"
