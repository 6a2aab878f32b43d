#!/bin/bash
# Thread roles, issue 13 done-when (4): a real DataLoader with
# pin_memory=True and num_workers=2 (tests/workloads/dataloader_pin.py) under
# `gpusample -- python3 ...`, read back with go tool pprof, on two stacks:
# Debian 12's python3 (3.11) + python3-torch 1.13 (workers forked), and the
# sid root's python3.14 + PyTorch 2.x (python_lib.sh: sid_cmd; workers from
# 3.14's default forkserver, threads named by torch: pt_data_pin,
# pt_data_worker):
#  - every thread has one thread_role on all its samples;
#  - the main thread (tid == pid of the loop) is "main" and runs the loop;
#  - a thread of the main process is "pin_memory" and runs _pin_memory_loop;
#  - both worker processes' main threads are "dataloader_worker" and run
#    _worker_loop -> Images.__getitem__;
#  - "queue_feeder" threads run multiprocessing's Queue._feed (80% of their
#    samples together, every one of them in some), in the worker processes
#    (sending batches back) at least.
#  - in go tool pprof itself every CPU sample's root frame is its process's
#    "[process main]" / "[process dataloader]" (other processes: their own
#    role's), so the main process and its workers are separate trees
#    without -tagroot.
# "Runs X": at least 80% of the thread's samples have X in their stack (the
# main thread: at least 10 samples, its import of torch comes first).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
sid_need
# roles_check TAG PYTHON: the checks below on one stack, files in $T/TAG.
roles_check() {
	local tag=$1 py=$2 o=$T/$1 main pin workers feeders nf all bad roots m g n p t
	mkdir -p "$o"
	"$GS" -F 499 -o "$o/pin" -q --format pprof -- $py "$PYWL/dataloader_pin.py" --seconds 4 \
		> "$o/out" 2> "$o/gs.err" || { cat "$o/out" "$o/gs.err"; fail "$tag: gpusample exited with $?"; }
	main=$(sed -n 's/.* pid=\([0-9]*\).*/\1/p' "$o/out")
	[ -n "$main" ] || { cat "$o/out"; fail "$tag: the loop did not finish"; }
	pprof_stacks "$o/pin.pb.gz" -lines > "$o/st" || fail "$tag: pprof: $(cat "$o/pprof.err")"
	# One line per sample: pid tid role <TAB> stack
	awk -F'\t' '{
		pid = tid = role = "?"; n = split($2, a, ",")
		for (i = 1; i <= n; i++) {
			if (a[i] ~ /^pid=/) pid = substr(a[i], 5)
			if (a[i] ~ /^tid=/) tid = substr(a[i], 5)
			if (a[i] ~ /^thread_role=/) role = substr(a[i], 13)
		}
		for (k = 0; k < $1; k++) print pid " " tid " " role "\t" $3
	}' "$o/st" > "$o/s"
	cut -f1 "$o/s" | sort | uniq -c | sort -k2n -k3n > "$o/threads"
	cat "$o/threads"
	awk '{print $2, $3}' "$o/threads" | uniq -d | grep -q . && fail "$tag: a thread with more than one thread_role"

	# runs PID TID FRAME-REGEX: % of that thread's samples with the frame.
	runs() {
		awk -F'\t' -v k="$1 $2" -v re="$3" 'index($1, k " ") == 1 { n++; if ($2 ~ re) m++ }
			END { print (n ? int(100 * m / n) : 0) }' "$o/s"
	}
	# threads_with ROLE [PID-FILTER]: "pid tid" of the threads with that role.
	threads_with() { awk -v r="$1" '$4 == r {print $2, $3}' "$o/threads"; }

	grep -q "^ *[0-9]* $main $main main$" "$o/threads" || fail "$tag: the main thread $main is not thread_role=main"
	# (most of the main thread's samples are torch's import, before the loop)
	m=$(awk -F'\t' -v k="$main $main " 'index($1, k) == 1 && $2 ~ /main [^;]*dataloader_pin\.py:/' "$o/s" | wc -l)
	[ "$m" -ge 10 ] || fail "$tag: main thread: only $m samples in the loop's main()"
	ok "$tag: main thread $main: thread_role=main, $m samples in main()"

	pin=$(threads_with pin_memory)
	[ "$(echo "$pin" | grep -c "^$main ")" -eq 1 ] || fail "$tag: expected one pin_memory thread in the main process, got: $pin"
	m=$(runs $pin '_pin_memory_loop [^;]*pin_memory\.py:')
	[ "$m" -ge 80 ] || fail "$tag: pin_memory thread $pin: only $m% in _pin_memory_loop"
	ok "$tag: pin_memory thread $pin: ${m}% in _pin_memory_loop"

	workers=$(threads_with dataloader_worker)
	[ "$(echo "$workers" | awk '$1 == $2 && $1 != m' m=$main | wc -l)" -eq 2 ] || fail "$tag: expected 2 dataloader_worker main threads, got: $workers"
	while read -r p t; do
		m=$(runs $p $t '_worker_loop [^;]*worker\.py:')
		g=$(runs $p $t 'Images\.__getitem__ [^;]*dataloader_pin\.py:')
		[ "$m" -ge 80 ] && [ "$g" -ge 20 ] || fail "$tag: worker $p: $m% in _worker_loop, $g% in __getitem__"
		ok "$tag: worker $p: thread_role=dataloader_worker, ${m}% in _worker_loop, ${g}% in __getitem__"
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
		n=$(awk -v p=$p -v t=$t '$2 == p && $3 == t {print $1}' "$o/threads")
		[ "$m" -gt 0 ] || [ "$n" -lt 3 ] || fail "$tag: queue_feeder $p/$t: none of its $n samples in Queue._feed"
		echo "$workers" | grep -q "^$p " && nf=$((nf + 1))
	done <<< "$feeders"
	all=$(awk -F'\t' '$1 ~ / queue_feeder$/ { n++; if ($2 ~ /_feed [^;]*queues\.py:/) m++ } END { print (n ? int(100 * m / n) : 0) }' "$o/s")
	[ "$all" -ge 80 ] || { awk -F'\t' '$1 ~ / queue_feeder$/ && $2 !~ /_feed /' "$o/s" | cut -c1-400 | head -5
		fail "$tag: queue_feeder threads: only $all% of their samples in Queue._feed"; }
	[ "$nf" -ge 1 ] || fail "$tag: no queue_feeder thread in a worker process: $feeders"
	ok "$tag: queue_feeder threads: $(echo $feeders | wc -w | awk '{print $1/2}'), $nf in workers, $all% of their samples in Queue._feed"

	# Viewers tell the processes apart without flags: the process root frame.
	GS_KEEP_PROCESS_FRAME=1 pprof_stacks "$o/pin.pb.gz" > "$o/raw" || fail "$tag: pprof: $(cat "$o/pprof.err")"
	# (the sid wrapper's mkdir/mount/chroot and 3.14's forkserver are
	# processes of other roles, each under its own root)
	bad=$(awk -F'\t' '{ n = split($3, f, ";"); r = "?"
		if (match($2, /process_role=[a-z_]*/)) r = "[process " substr($2, RSTART + 13, RLENGTH - 13) "]"
		if (f[n] != r) print $2 " root " f[n] }' "$o/raw" | head -3)
	[ -z "$bad" ] || fail "$tag: samples without their process root frame: $bad"
	roots=$(awk -F'\t' '{ n = split($3, f, ";"); print f[n] }' "$o/raw" | sort -u | tr '\n' ' ')
	ok "$tag: every sample's root frame is its process's role: $roots"
}

roles_check debian /usr/bin/python3
roles_check sid "$(sid_cmd python3.14)"
