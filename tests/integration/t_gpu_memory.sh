#!/bin/bash
# gs-test-timeout: 90
# GPU memory through the driver, no agent: the driver double's allocation
# entry points called like PyTorch's caching allocator (2 MiB and 20 MiB
# segments, an expandable segment by cuMemCreate/cuMemMap, one segment
# freed, an allocation past the device's 1 GiB answered
# CUDA_ERROR_OUT_OF_MEMORY, pinned host memory, a pitched allocation) under
# gpusample -- CMD: the uprobes on libcuda see every call; the report gives
# the peak with the stacks live at it and the out-of-memory answer with its
# stack, size and live bytes.  Then the same libcuda copied where a user can
# write it (/tmp): not probed, and the report says why.  Last, the real
# driver library (Debian's libcuda1, unpacked by scripts/fetch-libcuda.sh):
# every entry point resolves and takes its uprobes.  The trace (--format
# trace) carries the device bytes over time as a counter track.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, uprobes)"
LIB=$ROOT/$BUILD/fakes/libcuda.so.1
APP=$ROOT/tests/fakes/mem_app.py
DRV=$ROOT/$BUILD/realdrv/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1
[ -s "$LIB" ] || fail "$LIB missing: run make"
[ -e "$DRV" ] || fail "$DRV missing: run scripts/fetch-libcuda.sh (make test-deps does)"

(cd "$T" && FAKE_CUDA_MEM_MB=1024 timeout 60 "$GS" -q -o "$T/m" --format pprof,trace -- \
	/usr/bin/python3 "$APP" "$LIB") > "$T/m.out" 2>&1 || { cat "$T/m.out"; fail "gpusample -- mem_app failed"; }
grep -q '^mem_app peak=79691776 oom_rc=2 live_at_oom=58720256' "$T/m.out" ||
	{ cat "$T/m.out"; fail "the app did not run its pattern"; }
"$GS" report "$T/m.pb.gz" > "$T/m.report" 2>&1 || fail "gpusample report failed"
sed -n '/^Memory$/,/^$/p' "$T/m.report" > "$T/m.memory"
# The profile's window ends with the app: the 22 links' closes at its exit
# (an RCU grace period each) go to the link reaper, not the record loop
# (which ended the window 2.5-3.5 s late when it closed them itself).
app_s=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$T/m.out")
win_s=$(sed -n 's/^  duration \([0-9.]*\) s,.*/\1/p' "$T/m.report")
echo "app ${app_s:-?} s, profile window ${win_s:-?} s"
[ -n "$app_s" ] && [ -n "$win_s" ] && awk -v a="$app_s" -v w="$win_s" 'BEGIN { exit !(w <= a + 1.0) }' ||
	fail "the profile's window (${win_s:-?} s) ends over 1 s after the app (${app_s:-?} s): link closes stalled the record loop"
cat "$T/m.memory"
zcat -f "$T/m.pb.gz" | grep -ao "python code objects: [^\"]*" || true
# every call counted: 10 allocations (4 + 3 + cuMemCreate + pinned + pitched),
# 48 MiB (the segments left) live at the exit, 4 frees (a segment, pinned,
# pitched, cuMemRelease)
grep -Eq '^  pid [0-9]+: peak GPU memory 76\.0 MiB at [0-9.]+ s, 48\.0 MiB live at the end; 10 allocations \(80\.0 MiB\), 4 frees, 1 out of memory; pinned host memory peak 4\.0 MiB$' "$T/m.memory" ||
	fail "the Memory section's per-process line does not count every call"
grep -Eq '^  pid [0-9]+: live at the peak: 60\.0 MiB in mem_app\.py:[0-9]+ alloc > large_segments > main' "$T/m.memory" ||
	fail "the large segments' 60 MiB are not first under large_segments among the stacks live at the peak"
grep -Eq '8\.0 MiB in mem_app\.py:[0-9]+ alloc > small_segments' "$T/m.memory" ||
	fail "the small segments are not among the stacks live at the peak"
grep -Eq '8\.0 MiB in mem_app\.py:[0-9]+ expandable > main' "$T/m.memory" ||
	fail "cuMemCreate's physical memory is not among the stacks live at the peak"
grep -Eq '^  pid [0-9]+: out of memory at mem_app\.py:[0-9]+ alloc > forward > main > \.\.\.: asked 2\.0 GiB with 56\.0 MiB live \(cuMemAlloc_v2' "$T/m.memory" ||
	fail "no out-of-memory line with its stack, size and live bytes"
zcat -f "$T/m.pb.gz" > "$T/m.pb"
grep -aq 'gpu memory: 1 process(es) probed, [0-9]* driver records, 0 over the rate, 0 lost, 0 returns unmatched, 0 failed calls' "$T/m.pb" ||
	fail "records were lost or unmatched"
# the 22 links (and the steps' and agent's, if any) closed off the record loop
grep -aqE 'uprobe link closes: (2[2-9]|[3-9][0-9]|[0-9]{3,}) handed to the reaper.s threads \([0-9]+ pending at most\), 0 inline' "$T/m.pb" ||
	{ grep -ao 'uprobe link closes: [^"]*' "$T/m.pb"; fail "the probes' links were not all closed by the link reaper"; }
grep -aq 'gpu memory: pid [0-9]*: 14 of 14 CUDA memory entry points probed in /' "$T/m.pb" ||
	fail "not every entry point of the driver double was probed"
# pprof: gpu_inuse_space holds what was live at the exit (two 20 MiB and the
# four 2 MiB segments), gpu_alloc_space everything allocated on the device.
command -v go >/dev/null || fail "go missing (go tool pprof reads the profile back)"
go tool pprof -sample_index=gpu_inuse_space -top -nodecount=500 "$T/m.pb.gz" > "$T/inuse.top" 2>&1 ||
	{ cat "$T/inuse.top"; fail "go tool pprof -sample_index=gpu_inuse_space failed"; }
grep -Eq '^ +0 +0% +100% +40MB +83\.33% +large_segments$' "$T/inuse.top" &&
	grep -Eq '^ +0 +0% +100% +8MB +16\.67% +small_segments$' "$T/inuse.top" ||
	{ cat "$T/inuse.top"; fail "gpu_inuse_space: not 40 MB under large_segments and 8 MB under small_segments"; }
go tool pprof -sample_index=gpu_alloc_space -top -nodecount=500 "$T/m.pb.gz" > "$T/alloc.top" 2>&1 ||
	fail "go tool pprof -sample_index=gpu_alloc_space failed"
grep -Eq 'Total samples = 76\.02MB' "$T/alloc.top" && grep -Eq ' 60MB .* large_segments$' "$T/alloc.top" &&
	grep -Eq ' 8MB .* expandable$' "$T/alloc.top" ||
	{ cat "$T/alloc.top"; fail "gpu_alloc_space: not the 76 MiB allocated on the device by stack"; }
ok "driver allocations by stack: peak 76 MiB with its stacks, the OOM with its stack (no agent)"

# The trace's counter track: the process's device bytes over time, rising to
# the 76 MiB peak and ending at the 48 MiB left, valid by the format's rules.
node "$ROOT/tests/tools/check_trace.js" "$T/m.trace.json" --dump > "$T/m.trace" ||
	{ head -5 "$T/m.trace"; fail "trace with a GPU memory counter breaks the format's rules"; }
grep '^C .* GPU memory ' "$T/m.trace" | awk '{ sub("bytes=", "", $NF); print $(NF-1), $NF }' > "$T/m.counter"
echo "GPU memory counter: $(wc -l < "$T/m.counter") points, $(sort -n -k2 "$T/m.counter" | tail -1 | cut -d' ' -f2) bytes at most, $(tail -1 "$T/m.counter" | cut -d' ' -f2) at the end"
sort -n -c -k1 "$T/m.counter" 2>/dev/null || fail "GPU memory counter points out of time order"
[ "$(wc -l < "$T/m.counter")" -ge 10 ] || fail "GPU memory counter has fewer points than the allocations and frees"
[ "$(sort -n -k2 "$T/m.counter" | tail -1 | cut -d' ' -f2)" = 79691776 ] || fail "GPU memory counter does not reach the 76 MiB peak"
[ "$(tail -1 "$T/m.counter" | cut -d' ' -f2)" = 50331648 ] || fail "GPU memory counter does not end at the 48 MiB left"
ok "trace: a GPU memory counter track up to the 76 MiB peak, down to 48 MiB"

# A libcuda the job's user could have written: never probed.
cp "$LIB" "$T/libcuda.so.1" && chmod 666 "$T/libcuda.so.1"
(cd "$T" && FAKE_CUDA_MEM_MB=1024 timeout 60 "$GS" -q -o "$T/u" --format pprof -- \
	/usr/bin/python3 "$APP" "$T/libcuda.so.1" --wait 0.6) > "$T/u.out" 2>&1 || { cat "$T/u.out"; fail "gpusample with a user libcuda failed"; }
"$GS" report "$T/u.pb.gz" > "$T/u.report" 2>&1 || fail "gpusample report failed"
grep -q 'GPU memory not tracked: libcuda .*libcuda.so.1 not probed: .*writable by group or others' "$T/u.report" ||
	{ grep -i memory "$T/u.report"; fail "a user-writable libcuda was not refused with its reason"; }
grep -q '^Memory$' "$T/u.report" && fail "a refused libcuda was probed"
ok "a libcuda outside root-owned paths is refused and named"

# The real driver: every entry point exported, resolved and probed.
(cd "$T" && timeout 60 "$GS" -q -o "$T/r" --format pprof -- /usr/bin/python3 -c \
	"import ctypes, time; ctypes.CDLL('$DRV'); time.sleep(1.2)") > "$T/r.out" 2>&1 ||
	{ cat "$T/r.out"; fail "gpusample with the real driver library failed"; }
zcat -f "$T/r.pb.gz" | grep -aq "gpu memory: pid [0-9]*: 14 of 14 CUDA memory entry points probed in .*/libcuda.so.[0-9.]*" ||
	{ "$GS" report "$T/r.pb.gz" | grep -i memory; fail "not every entry point resolved in the real libcuda"; }
ok "real driver $(basename "$(readlink -f "$DRV")"): all 14 entry points probed"
