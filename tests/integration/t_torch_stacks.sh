#!/bin/bash
# Whole native stacks through oneDNN's JIT kernels, issue 13 done-when (1):
# the PyTorch CPU training loop (train_torch.py, Debian python3 + torch,
# 2 intra-op threads).  JIT kernels live in anonymous executable memory with
# neither an unwind table nor a frame pointer; the BPF walker scans the
# stack for a validated return address there and continues with CFI.
#  - attach (`gpusample -p`) once the loop runs and the tables are built:
#    >= 99% of the main process's samples and >= 99% of its intra-op
#    threads' samples (tid != pid) reach their native root (_start, or
#    clone/clone3 for threads); no sample has a Python frame at its root;
#    the profile comments count the samples unwound by a stack scan (> 0:
#    the loop spends 10-20% in JIT kernels).
#  - launch (`gpusample -- ...`): ONEDNN_JIT_PROFILE=2 is set for the
#    command, so JIT kernels are named from oneDNN's perf map (jit_*).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
roots() { # FULL [FILTER-AWK] -> "good total" over samples matching the filter
	awk -F'\t' "$2"' { n = split($3, fr, ";"); r = fr[n]; sub(/ .*/, "", r)
		tot += $1; if (r ~ /^(_start|clone|clone3|__clone|__clone3)$/) good += $1
		else bad[r] += $1 }
		END { printf "%d %d", good, tot; for (b in bad) printf " |%d:%s", bad[b], b; printf "\n" }' "$1"
}
# -- attach, tables warm ------------------------------------------------------
ONEDNN_JIT_PROFILE=2 /usr/bin/python3 "$PYWL/train_torch.py" --seconds 60 --workers 0 --threads 2 \
	> "$T/train.out" 2>&1 &
tpid=$!
# oneDNN writes its perf map with the first JIT kernel: the loop runs
for _ in $(seq 600); do [ -s "/tmp/perf-$tpid.map" ] && break; sleep 0.1; done
[ -s "/tmp/perf-$tpid.map" ] || fail "train_torch.py wrote no oneDNN perf map within 60 s"
gs_start -p "$tpid" -d 4 -F 499 -o "$T/att" -q --format pprof
gs_wait
kill "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
rm -f "/tmp/perf-$tpid.map" # the test switched it on: oneDNN never removes it
pprof_stacks "$T/att.pb.gz" -lines > "$T/att.full" || fail "pprof failed: $(cat "$T/pprof.err")"
read -r mg mt mwhy < <(roots "$T/att.full" '$2 ~ /(^|,)pid='"$tpid"',/')
read -r tg tt twhy < <(roots "$T/att.full" '$2 ~ /(^|,)pid='"$tpid"',/ && $2 !~ /tid='"$tpid"'(,|$)/')
pyroot=$(awk -F'\t' '{ n = split($3, fr, ";"); if (fr[n] ~ /\.py:[0-9]+$|^<module> /) s += $1 }
	END { print s + 0 }' "$T/att.full")
scan=$(pprof -comments "$T/att.pb.gz" | grep '^native stacks:.*stack scan')
echo "attach: main process $mg of $mt samples rooted ${mwhy:-}"
echo "attach: intra-op threads $tg of $tt samples rooted ${twhy:-}"
echo "attach: $pyroot samples with a Python frame at the root; comment: ${scan:-none}"
[ "$mt" -ge 100 ] && [ "$tt" -ge 20 ] || fail "too few samples (main $mt, threads $tt)"
ratio_at_least "$mg" "$mt" 0.99 || fail "main process: $mg of $mt samples reach their native root"
ratio_at_least "$tg" "$tt" 0.99 || fail "intra-op threads: $tg of $tt samples reach their native root"
[ "$pyroot" -eq 0 ] || fail "$pyroot samples with a Python frame at the root of the stack"
[ -n "$scan" ] || fail "no samples unwound through JIT code by a stack scan (comment missing)"
# -- launch: oneDNN's perf map is switched on ----------------------------------
"$GS" -F 199 -o "$T/lau" -q --format pprof -- /usr/bin/python3 "$PYWL/train_torch.py" \
	--steps 40 --workers 0 --threads 2 > "$T/lau.out" 2> "$T/lau.err" ||
	{ cat "$T/lau.err"; fail "gpusample -- train_torch.py failed"; }
pprof_stacks "$T/lau.pb.gz" > "$T/lau.full" || fail "pprof failed: $(cat "$T/pprof.err")"
jit=$(grep -o ';jit_[a-z0-9_]*\|	jit_[a-z0-9_]*' "$T/lau.full" | sort -u | tr -d ';\t' | tr '\n' ' ')
read -r lg lt lwhy < <(roots "$T/lau.full" '$2 ~ /process_role=main/ && /train_step/')
echo "launch: JIT kernels named: ${jit:-none}"
echo "launch (informational: tables of libraries loaded by the import are built while sampling): training-step samples rooted $lg of $lt"
[ -n "$jit" ] || fail "launch mode: no JIT kernel named from oneDNN's perf map (ONEDNN_JIT_PROFILE=2)"
# the maps gpusample switched on are gone with the command's processes; one
# the user asked for (their own ONEDNN_JIT_PROFILE) stays
pids=$(grep -o 'pid=[0-9]*' "$T/lau.full" | sort -u | cut -d= -f2)
[ -n "$pids" ] || fail "launch mode: no pid label in the profile"
for p in $pids; do
	[ ! -e "/tmp/perf-$p.map" ] || fail "launch mode left /tmp/perf-$p.map behind"
done
ONEDNN_JIT_PROFILE=2 "$GS" -F 99 -o "$T/own" -q --format pprof -- /usr/bin/python3 "$PYWL/train_torch.py" \
	--steps 5 --workers 0 --threads 2 > "$T/own.out" 2> "$T/own.err" ||
	{ cat "$T/own.err"; fail "gpusample -- train_torch.py (own ONEDNN_JIT_PROFILE) failed"; }
pprof_stacks "$T/own.pb.gz" > "$T/own.full" || fail "pprof failed: $(cat "$T/pprof.err")"
kept=0
for p in $(grep -o 'pid=[0-9]*' "$T/own.full" | sort -u | cut -d= -f2); do
	[ -e "/tmp/perf-$p.map" ] && kept=$((kept + 1)) && rm -f "/tmp/perf-$p.map"
done
[ "$kept" -ge 1 ] || fail "the user's own ONEDNN_JIT_PROFILE=2 map was removed"
echo "launch: perf maps of $(echo $pids | wc -w) process(es) removed; the user's own kept ($kept)"
ok "native stacks reach their root through JIT code ($mg/$mt main, $tg/$tt intra-op)"
