#!/bin/bash
# Exit and locks (issue 15 item 8), with a slow GPU: every GetData of the
# CUPTI double takes 900 ms, and the agent's watcher holds its lock
# meanwhile.  A module loaded then (its callback's bounded wait for the lock
# fails) still has its cubin read by the host; contexts destroyed then (at
# the job's end, while attached) are never touched by CUPTI calls again,
# and nothing calls GetData or Disable at process exit (4 late modules, one
# every 0.3 s: some land while the watcher holds the lock): the double counts
# no call on a destroyed context, and the job exits 0.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
# subscribe=init: the agent sees the 2 modules loaded before the attach too
# (a dormant agent holds no CUPTI subscription and would miss them).
export FAKE_CUPTI_GETDATA_MS=900 GS_AGENT_DEBUG=1 GS_AGENT_OPTS=subscribe=init
start_app 7 --rate 600 --late-module 1.2 --late-count 4
driver -n 1 -t 10
wait_app
show
grep 'gpusample-agent: .*busy' "$T/app.out" | head -3
[ "$(val armed_status)" = 1 ] || fail "agent did not arm"
[ "$(val cubins_read)" = 6 ] || fail "host read $(val cubins_read) cubins, expected 6 (a late module's was dropped?)"
[ "$(stat dead_ctx_calls)" = 0 ] || fail "$(stat dead_ctx_calls) CUPTI calls on a destroyed context"
[ "$(val samples)" -gt 0 ] || fail "no samples"
ok "late module under a busy lock kept ($(val cubins_read) cubins), no CUPTI call on destroyed contexts, clean exit ($(grep -c 'busy' "$T/app.out") busy-lock events)"
