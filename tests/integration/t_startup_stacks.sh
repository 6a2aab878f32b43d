#!/bin/bash
# Start-up stacks of a PyTorch 2.x job (python3.14 in the sid root, launched
# under gpusample from its first instruction, imports included): under 1%
# of its native walks stop without an unwind table and under 1% are cut at
# the native depth bound (GS_MAX_USER_FRAMES: importing torch nests a dozen
# native frames per Python import level; at 127 frames 20.6% of these
# stacks were cut), both as the viewer sees them ([truncated] frames,
# tests/tools/unwind_shares.sh's rule) and as the unwinder counted them (the
# profile's "native unwind stops" comment, over CPU samples plus off-CPU
# stacks).  "No table" stops come from libraries sampled before their table
# is loaded (dlopen'ed libraries run their constructors at once;
# libtorch_cpu's table takes 0.2-0.7 s to build) and from code outside
# every FDE (ld.so's _start): 13.8-14.8% of walks (3 runs) before the
# builder queued every new object at once, pending objects were walked by
# validated frame-pointer steps and scans (16 KiB), entry points got an
# outermost row and the vDSO a table; 0.00-0.49% after (8 runs).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
sid_need
PY=$(sid_cmd python3.14)
timeout -k 5 240 "$GS" -q -o "$T/st" -- "$PY" "$ROOT/tests/workloads/train_torch.py" --seconds 3 \
	> "$T/out" 2> "$T/err" || fail "gpusample or the job failed: $(tail -3 "$T/err")"
"$ROOT/tests/tools/unwind_shares.sh" "$T/st.pb.gz" > "$T/shares" || fail "pprof could not read the profile"
read -r _ n trunc _ < <(grep '^all ' "$T/shares")
pprof -comments "$T/st.pb.gz" > "$T/comments" || fail "pprof -comments: $(cat "$T/pprof.err")"
walks=$(awk '/^cpu samples: / { c = $3 + 0 } /^off-CPU stacks: / { if (match($0, /; [0-9]+ stacks,/)) o = substr($0, RSTART + 2, RLENGTH - 10) + 0 }
	END { print c + o }' "$T/comments")
read -r notab depth < <(sed -n 's/^native unwind stops: no table \([0-9]*\), .*, depth \([0-9]*\)$/\1 \2/p' "$T/comments")
notab=${notab:-0} depth=${depth:-0}
share=$(awk -v a="$notab" -v b="$walks" 'BEGIN { printf "%.2f", 100 * a / (b ? b : 1) }')
echo "stacks $n: ${trunc}% [truncated]; walks $walks: depth stops $depth, no-table stops $notab (${share}%)"
[ "$n" -ge 200 ] && [ "$walks" -ge 200 ] || fail "only $n stacks, $walks walks: $(tail -3 "$T/err")"
awk -v a="$trunc" 'BEGIN { exit !(a < 1) }' || fail "${trunc}% of the stacks cut at the depth bound"
ratio_at_least $((walks - 100 * depth)) "$walks" 0 || fail "$depth of $walks walks stopped at the depth bound (1% allowed)"
ratio_at_least $((walks - 100 * notab)) "$walks" 0 || fail "$notab of $walks walks (${share}%) stopped without an unwind table (1% allowed)"
ok "PyTorch 2.x start-up: ${trunc}% of $n stacks truncated; of $walks walks $depth at the depth bound, $notab without a table (${share}%)"
