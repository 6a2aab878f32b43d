#!/bin/bash
# Two devices of different architectures (sm_90 and sm_80 doubles): two
# contexts, two different stall tables, every PC count refers to an index of
# its own context's table, both contexts sampled.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"

export FAKE_CUDA_DEVICES=2 FAKE_CUDA_ARCH=90,80
start_app 60 --rate 1000 --devices 2
driver -n 1 -t 1.5
wait_app
show
n=$(grep -c '^stall_table ' "$T/driver.out")
[ "$n" = 2 ] || fail "expected 2 stall tables, got $n"
sizes=$(awk '$1 == "stall_table" { print $4 }' "$T/driver.out" | sort -u | wc -l)
[ "$sizes" = 2 ] || fail "both contexts got the same stall table size"
devs=$(awk '$1 == "stall_table" { print $3 }' "$T/driver.out" | sort -u | wc -l)
[ "$devs" = 2 ] || fail "stall tables not from two devices"
awk '$1 == "stall_table" { split($5, a, "="); if (a[2] <= 0) exit 1 }' "$T/driver.out" ||
	fail "a context got no samples"
[ "$(val bad_refs)" = 0 ] || fail "a PC count refers to an index outside its context's table"
[ "$(val samples)" = "$(stat samples_delivered)" ] || fail "sample totals differ from the double's"
ok "two contexts, two stall tables, samples kept apart"
