#!/bin/bash
# Issue 2 #1: a frame-pointer C workload main -> a -> b -> c: >= 95% of the
# samples in c carry the full chain, as read by `go tool pprof -traces`.
source "$(dirname "$0")/lib.sh"
"$WL/cpu_chain" 60 & pid=$!
gs_start -p "$pid" -d 4 -o "$T/chain" -q --no-cfi
gs_wait
kill "$pid" 2>/dev/null
pprof_stacks "$T/chain.pb.gz" > "$T/stacks" || fail "pprof could not read the profile: $(cat "$T/pprof.err")"
in_c=$(awk -F'\t' '{split($3,f,";"); if (f[1]=="c") n+=$1} END{print n+0}' "$T/stacks")
full=$(awk -F'\t' '$3 ~ /^c;b;a;main(;|$)/ {n+=$1} END{print n+0}' "$T/stacks")
echo "samples in c: $in_c, with c;b;a;main: $full"
[ "$in_c" -ge 100 ] || fail "too few samples in c ($in_c): $(head -5 "$T/stacks")"
ratio_at_least "$full" "$in_c" 0.95 || fail "only $full of $in_c samples in c carry main->a->b->c"
ok "chain complete in $full/$in_c samples"
