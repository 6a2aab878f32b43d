#!/bin/bash
# gs-test-timeout: 120
# Whole native stacks on PyTorch 2.x: train_torch.py's CNN loop (2 intra-op
# threads, no workers) run by the sid root's python3.14 with its torch 2.x
# and oneDNN 3.x (python_lib.sh: sid_cmd; the job chrooted, gpusample
# outside), attach (`-p PID` once the loop runs) and launch
# (`gpusample -- ...`, the loop's samples: start-up's imports are sampled
# while their libraries' tables are built, so a few of them stop short;
# the whole run's figure is printed): >= 99% of the main process's CPU
# samples reach
# their thread's start: _start, or clone/clone3 for its other threads.  The
# sid root's libc is stripped: a thread's root is then "libc.so.6+0xOFF",
# accepted only where that offset's CFI says the return address is
# undefined (readelf: the outermost frame of clone and clone3), so a walk
# cut inside libc still fails.  The frame below main, libc's static
# __libc_start_call_main, is named (from its caller, __libc_start_main).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
sid_need
PY=$(sid_cmd python3.14)
"$PY" -c 'import torch; assert torch.__version__ >= "2", torch.__version__' ||
	fail "the sid root's python3.14 cannot import PyTorch 2.x"
libc=$(ls "$SID_ROOT"/usr/lib/x86_64-linux-gnu/libc.so.6) || fail "no libc.so.6 in $SID_ROOT"
# [lo, hi) of each FDE of libc whose return address is undefined
readelf --debug-dump=frames-interp "$libc" 2>/dev/null | awk '/ FDE /{ split($NF, a, /[=.]+/)
	lo = a[2]; hi = a[3]; next } /^   LOC/ { ra = NF; next }
	/^[0-9a-f]+ / { if ($NF == "u" && NF == ra) print lo, hi }' | sort -u > "$T/outermost"
[ -s "$T/outermost" ] || fail "no outermost frame (undefined return address) in $libc's CFI"
# A stack deeper than the walk's 255 frames ("[truncated]": lazy imports
# inside the loop nest ~190 native frames deep) is cut by that cap, not by
# the unwinder: such samples are left out of the ratio, at most 2% of them.
roots() { # FULL FILTER-AWK -> "good total cut |n:root..." over samples matching the filter
	awk -F'\t' -v list="$T/outermost" 'BEGIN { while ((getline l < list) > 0) {
			split(l, a, " "); n_out++; lo[n_out] = a[1]; hi[n_out] = a[2] } }
		'"$2"' { n = split($3, fr, ";"); r = fr[n]; sub(/ .*/, "", r); tot += $1; ok = 0
		if (r ~ /^(_start|clone|clone3|__clone|__clone3)$/) ok = 1
		else if (r ~ /^libc\.so\.6\+0x[0-9a-f]+$/) {
			off = substr(r, 13) # padded to 16 hex digits as readelf prints them: compared as strings
			while (length(off) < 16) off = "0" off
			for (i = 1; i <= n_out; i++) if (off "" >= lo[i] "" && off "" < hi[i] "") ok = 1 }
		if (r == "[truncated]") { tot -= $1; cut += $1 } else if (ok) good += $1; else bad[r] += $1 }
		END { printf "%d %d %d", good, tot, cut; for (b in bad) printf " |%d:%s", bad[b], b; printf "\n" }' "$1"
}
# -- attach, once the loop runs ----------------------------------------------
"$PY" "$PYWL/train_torch.py" --seconds 60 --workers 0 --threads 2 > "$T/train.out" 2>&1 &
tpid=$!
for _ in $(seq 600); do grep -q libdnnl "/proc/$tpid/maps" 2>/dev/null && break; sleep 0.1; done
grep -q libdnnl "/proc/$tpid/maps" || fail "python3.14 train_torch.py mapped no libdnnl within 60 s"
sleep 4 # torch imported: the loop runs and oneDNN's kernels are generated
gs_start -p "$tpid" -d 4 -F 499 -o "$T/att" -q --format pprof
gs_wait
kill "$tpid" 2>/dev/null; wait "$tpid" 2>/dev/null
pprof_stacks "$T/att.pb.gz" > "$T/att.full" || fail "pprof failed: $(cat "$T/pprof.err")"
read -r ag at acut awhy < <(roots "$T/att.full" '$2 ~ /(^|,)pid='"$tpid"',/')
echo "attach: $ag of $at main-process samples reach their thread's start ${awhy:-}; $acut cut at the depth cap"
echo "attach: $(pprof -comments "$T/att.pb.gz" | grep "^native unwind stops" || echo "no native unwind stops")"
# -- launch --------------------------------------------------------------------
"$GS" -F 499 -o "$T/lau" -q --format pprof -- "$PY" "$PYWL/train_torch.py" \
	--seconds 10 --workers 0 --threads 2 > "$T/lau.out" 2> "$T/lau.err" ||
	{ cat "$T/lau.err"; fail "gpusample -- python3.14 train_torch.py failed"; }
pprof_stacks "$T/lau.pb.gz" > "$T/lau.full" || fail "pprof failed: $(cat "$T/pprof.err")"
read -r wg wt wcut wwhy < <(roots "$T/lau.full" '$2 ~ /process_role=main/')
echo "launch (informational: start-up included, its libraries' tables built while sampling): $wg of $wt main-process samples reach their thread's start ${wwhy:-}; $wcut cut at the depth cap"
read -r lg lt lcut lwhy < <(roots "$T/lau.full" '$2 ~ /process_role=main/ && /train_step/')
echo "launch: $lg of $lt main-process samples of the loop (train_step) reach their thread's start ${lwhy:-}; $lcut cut at the depth cap"
echo "launch: $(pprof -comments "$T/lau.pb.gz" | grep "^native unwind stops" || echo "no native unwind stops")"
# the stripped libc's __libc_start_call_main (static) is named from its caller
read -r named tostart < <(awk -F'\t' '$3 ~ /;_start$/ { t += $1
	if ($3 ~ /;__libc_start_call_main;__libc_start_main[^;]*;_start$/) n += $1 }
	END { print n + 0, t + 0 }' "$T/att.full")
echo "attach: $named of $tostart samples rooted at _start name __libc_start_call_main"
[ "$at" -ge 300 ] && [ "$lt" -ge 200 ] || fail "too few samples (attach $at, launch $lt)"
[ "$tostart" -gt 0 ] && [ "$named" -eq "$tostart" ] ||
	fail "$((tostart - named)) of $tostart samples rooted at _start leave libc's entry frame unnamed"
ratio_at_least "$acut" "$((at + acut))" 0.02 && fail "attach: $acut samples cut at the depth cap"
ratio_at_least "$lcut" "$((lt + lcut))" 0.02 && fail "launch: $lcut samples cut at the depth cap"
ratio_at_least "$ag" "$at" 0.99 || fail "attach: $ag of $at samples reach their thread's start"
ratio_at_least "$lg" "$lt" 0.99 || fail "launch: $lg of $lt samples reach their thread's start"
ok "PyTorch 2.x CNN loop: $ag/$at (attach), $lg/$lt (launch) main-process samples whole"
