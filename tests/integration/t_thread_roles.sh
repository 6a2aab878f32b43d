#!/bin/bash
# Thread roles, issue 13 done-when (4): a real DataLoader with
# pin_memory=True and num_workers=2 (tests/workloads/dataloader_pin.py on
# Debian's python3 + python3-torch) under `gpusample -- python3 ...`, read
# back with go tool pprof:
#  - every thread has one thread_role on all its samples;
#  - the main thread (tid == pid of the loop) is "main" and runs the loop;
#  - a thread of the main process is "pin_memory" and runs _pin_memory_loop;
#  - both worker processes' main threads are "dataloader_worker" and run
#    _worker_loop -> Images.__getitem__;
#  - "queue_feeder" threads run multiprocessing's Queue._feed (80% of their
#    samples together, every one of them in some), in the worker processes
#    (sending batches back) at least.
#  - in go tool pprof itself every CPU sample's root frame is its process's
#    "[process main]" / "[process dataloader]", so the main process and its
#    workers are separate trees without -tagroot.
# "Runs X": at least 80% of the thread's samples have X in their stack (the
# main thread: at least 10 samples, its import of torch comes first).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make deps)"
"$GS" -F 499 -o "$T/pin" -q --format pprof -- /usr/bin/python3 "$PYWL/dataloader_pin.py" --seconds 4 \
	> "$T/out" 2> "$T/gs.err" || { cat "$T/out" "$T/gs.err"; fail "gpusample exited with $?"; }
main=$(sed -n 's/.* pid=\([0-9]*\).*/\1/p' "$T/out")
[ -n "$main" ] || { cat "$T/out"; fail "the loop did not finish"; }
pprof_stacks "$T/pin.pb.gz" -lines > "$T/st" || fail "pprof: $(cat "$T/pprof.err")"
# One line per sample: pid tid role <TAB> stack
awk -F'\t' '{
	pid = tid = role = "?"; n = split($2, a, ",")
	for (i = 1; i <= n; i++) {
		if (a[i] ~ /^pid=/) pid = substr(a[i], 5)
		if (a[i] ~ /^tid=/) tid = substr(a[i], 5)
		if (a[i] ~ /^thread_role=/) role = substr(a[i], 13)
	}
	for (k = 0; k < $1; k++) print pid " " tid " " role "\t" $3
}' "$T/st" > "$T/s"
cut -f1 "$T/s" | sort | uniq -c | sort -k2n -k3n > "$T/threads"
cat "$T/threads"
awk '{print $2, $3}' "$T/threads" | uniq -d | grep -q . && fail "a thread with more than one thread_role"

# runs PID TID FRAME-REGEX: % of that thread's samples with the frame.
runs() {
	awk -F'\t' -v k="$1 $2" -v re="$3" 'index($1, k " ") == 1 { n++; if ($2 ~ re) m++ }
		END { print (n ? int(100 * m / n) : 0) }' "$T/s"
}
# threads_with ROLE [PID-FILTER]: "pid tid" of the threads with that role.
threads_with() { awk -v r="$1" '$4 == r {print $2, $3}' "$T/threads"; }

grep -q "^ *[0-9]* $main $main main$" "$T/threads" || fail "the main thread $main is not thread_role=main"
# (most of the main thread's samples are torch's import, before the loop)
m=$(awk -F'\t' -v k="$main $main " 'index($1, k) == 1 && $2 ~ /main [^;]*dataloader_pin\.py:/' "$T/s" | wc -l)
[ "$m" -ge 10 ] || fail "main thread: only $m samples in the loop's main()"
ok "main thread $main: thread_role=main, $m samples in main()"

pin=$(threads_with pin_memory)
[ "$(echo "$pin" | grep -c "^$main ")" -eq 1 ] || fail "expected one pin_memory thread in the main process, got: $pin"
m=$(runs $pin '_pin_memory_loop [^;]*pin_memory\.py:')
[ "$m" -ge 80 ] || fail "pin_memory thread $pin: only $m% in _pin_memory_loop"
ok "pin_memory thread $pin: ${m}% in _pin_memory_loop"

workers=$(threads_with dataloader_worker)
[ "$(echo "$workers" | awk '$1 == $2 && $1 != m' m=$main | wc -l)" -eq 2 ] || fail "expected 2 dataloader_worker main threads, got: $workers"
while read -r p t; do
	m=$(runs $p $t '_worker_loop [^;]*worker\.py:')
	g=$(runs $p $t 'Images\.__getitem__ [^;]*dataloader_pin\.py:')
	[ "$m" -ge 80 ] && [ "$g" -ge 20 ] || fail "worker $p: $m% in _worker_loop, $g% in __getitem__"
	ok "worker $p: thread_role=dataloader_worker, ${m}% in _worker_loop, ${g}% in __getitem__"
done <<< "$workers"

# Feeder threads are small (a few samples each, some at thread start or
# blocked before a frame was read): the 80% holds over all of them, and
# each with 3 samples or more has Queue._feed in at least one (a thread seen
# once may have been seen only in threading's bootstrap).
feeders=$(threads_with queue_feeder)
nf=0
while read -r p t; do
	[ -n "$p" ] || continue
	m=$(runs $p $t '_feed [^;]*queues\.py:')
	n=$(awk -v p=$p -v t=$t '$2 == p && $3 == t {print $1}' "$T/threads")
	[ "$m" -gt 0 ] || [ "$n" -lt 3 ] || fail "queue_feeder $p/$t: none of its $n samples in Queue._feed"
	echo "$workers" | grep -q "^$p " && nf=$((nf + 1))
done <<< "$feeders"
all=$(awk -F'\t' '$1 ~ / queue_feeder$/ { n++; if ($2 ~ /_feed [^;]*queues\.py:/) m++ } END { print (n ? int(100 * m / n) : 0) }' "$T/s")
[ "$all" -ge 80 ] || { awk -F'\t' '$1 ~ / queue_feeder$/ && $2 !~ /_feed /' "$T/s" | cut -c1-400 | head -5
	fail "queue_feeder threads: only $all% of their samples in Queue._feed"; }
[ "$nf" -ge 1 ] || fail "no queue_feeder thread in a worker process: $feeders"
ok "queue_feeder threads: $(echo $feeders | wc -w | awk '{print $1/2}'), $nf in workers, $all% of their samples in Queue._feed"

# Viewers tell the processes apart without flags: the process root frame.
GS_KEEP_PROCESS_FRAME=1 pprof_stacks "$T/pin.pb.gz" > "$T/raw" || fail "pprof: $(cat "$T/pprof.err")"
bad=$(awk -F'\t' '{ n = split($3, f, ";"); r = ($2 ~ /process_role=dataloader/) ? "[process dataloader]" : "[process main]"
	if (f[n] != r) print $2 " root " f[n] }' "$T/raw" | head -3)
[ -z "$bad" ] || fail "samples without their process root frame: $bad"
ok "every sample's root frame is [process main] or [process dataloader]"
