#!/bin/bash
# Counts of the middle layer's shape, for the design notes and reviews:
# readers, tables and helpers that should exist once, and the call graph
# between components (from the objects' symbols, not from greps of calls).
#   scripts/arch-counts.sh [BUILD]     (BUILD defaults to build/; run `make` first)
#   scripts/arch-counts.sh --check [BUILD]
#                                      fail when a count is above its value in
#                                      scripts/arch-counts.baseline (CI runs
#                                      this: t_arch_counts); lower them there
#                                      when a change brings one down
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --check ]; then
	shift
	now=$("$0" "$@")
	echo "$now"
	awk 'function key(l) { l = substr(l, 1, 44); sub(/ +$/, "", l); return l }
	     function val(l) { return substr(l, 45) + 0 }
	     NR == FNR { if ($0 !~ /^#/ && NF) base[key($0)] = val($0); next }
	     { k = key($0); seen[k] = 1
	       if (!(k in base)) { print "arch-counts: no baseline for \"" k "\""; bad = 1 }
	       else if (val($0) > base[k]) { print "arch-counts: \"" k "\" is " val($0) ", above its baseline " base[k]; bad = 1 } }
	     END { for (k in base) if (!(k in seen)) { print "arch-counts: \"" k "\" is no longer counted"; bad = 1 }
	           exit bad }' scripts/arch-counts.baseline - <<<"$now"
	exit
fi
B=${1:-build}
SRC="bpf cli session native python gpu symbolizer proc dump inject output gpu_sampler util"
c() { grep -rlE "$1" --include=*.c --include=*.h $SRC 2>/dev/null | grep -v '\.bpf\.' | grep -vE "${2:-^$}" || true; }
show() { local n; n=$(printf '%s\n' "$2" | grep -c . || true); printf '%-44s %3d  %s\n' "$1" "$n" "$(echo $2)"; }

show "readers of /proc/PID/maps"       "$(c '"/proc/%[ud]/maps"')"
# A target's maps read (or asked of the kernel) by a runtime or the engine
# itself instead of asking the process table (gs_proc_maps_reread), which
# keeps one snapshot per process and the back-off rules; dump/ is a command
# of its own, and gpusample's own maps (getpid()) are no target's.
show "private maps reads outside proc/"   "$(grep -rlE 'gs_proc_(maps_read|exec_ranges|vma_at)\((tgid|[a-z]+->tgid|[a-z]+\.tgid|pid)' \
	--include=*.c native python gpu symbolizer session 2>/dev/null || true)"
# Per-process state keyed by tgid (a map commented "tgid ->", or a table
# struct of processes): the target is one, proc/'s, with handler slots.
show "per-process tables (files)"      "$(c 'struct gs_hmap [a-z_]+; +/\* tgid ->|^struct gs_proctab \{')"
show "ELF openers (elf_begin)"         "$(c 'elf_begin\(')"
show "remote-memory readers"           "$(c 'process_vm_readv\(')"
show "remote-memory writers"           "$(c 'process_vm_writev\(')"
show "raise_nofile"                    "$(c 'raise_nofile')"
show "hash mixers outside util/hash.h" "$(c '0xff51afd7ed558ccd|0x9e3779b|0x85ebca|0xcbf29ce484222325|0x100000001b3' '^util/hash\.h$')"
show "linear-probing tables (files)"   "$(c '\+ 1\) & |& \(\w*cap\w* - 1\)|& mask\b' '^util/hashmap\.[ch]$')"
show "clock helpers (clock_gettime)"   "$(c 'clock_gettime\(' '^util/clock\.h$')"
printf '%-44s %3d\n' "realloc( call sites outside util/" \
	"$(grep -rn 'realloc(' --include=*.c --include=*.h $SRC | grep -v '^util/' | wc -l)"

# Keyed stores (a gs_hmap / gs_kmap field whose comment names its key): one
# whose key starts with a pid is per-process state outside the process
# table; one keyed by a thread (a tid, with at most its pid/tgid: nothing
# else in the key) is a thread table.  A key that merely contains a tid
# among other fields (the join's launch sites: stack, tid, kernel, role)
# aggregates something else and is neither.  The one thread table is the
# process table's own (proc/threads.c).  As for the per-pid lists below,
# output/ is not the engine: its indexes (the report's workers, the HTML
# page's threads) are over a written profile, not state of the run.
keyed() { grep -rnE '^\s*struct gs_[hk]map [a-z_]+; +/\* ' --include=*.c --include=*.h $SRC 2>/dev/null |
	grep -v '^proc/table\.c' | grep -v '^output/' | awk -F'/\\* ' -v want="$1" '{ key = $2; sub(/->.*/, "", key)
		hastid = key ~ /(^|[^a-z_])tid([^a-z_]|$)/
		ids = key; gsub(/[^a-z_]+/, " ", ids); n = split(ids, w, " "); other = 0
		for (i = 1; i <= n; i++) if (w[i] != "pid" && w[i] != "tgid" && w[i] != "tid") other = 1
		tid = hastid && !other
		pid = key ~ /^\(?(pid|tgid)([^a-z_]|$)/ && !hastid
		if ((want == "tid" && tid) || (want == "pid" && pid && !tid)) { split($1, f, ":"); print f[1] ":" f[2] } }'; }
show "per-process stores outside proc/table.c"  "$(keyed pid)"
# The same as a list: an array kept in a struct whose elements are looked
# up by their pid or tgid member (c->tables[i].pid == pid), in the engine
# and the runtimes.  Local arrays (a sorted batch of BPF keys) and the
# profile readers (output/: the processes of a written profile) are not
# stores; nor is `gpusample dump`'s list of targets (cli/dump.c: a command
# of its own, without the table).
show "per-pid lists outside the table (files)"  "$(grep -rlE '(->|\.)[a-z_]+\[[a-z_]+\](\.|->)(pid|tgid) *[!=]=' \
	--include=*.c --include=*.h cli session native python gpu symbolizer 2>/dev/null | grep -v '^cli/dump\.c$' || true)"
show "thread tables"                           "$(keyed tid)"
# Each record type decoded by one consumer: the call sites of the codec's
# per-type decoders, the most for one type.
dec=$(grep -rnoE 'gs_rec_(cpu_sample|offcpu_stack|gpu_launch|stack|pc_batch|stall_table)\(' \
	--include=*.c $SRC | grep -v '^util/' | sed 's/.*://' | sort | uniq -c | sort -rn)
printf '%-44s %3d  %s\n' "record decodes per record type (most)" \
	"$(echo "$dec" | awk 'NR == 1 {print $1 + 0} END {if (!NR) print 0}')" "$(echo $dec)"
show "stall tables (files decoding them)"      "$(c 'gs_rec_stall_table\(' '^util/')"
printf '%-44s %3d\n' "lines in cli/" "$(cat cli/*.c cli/*.h | wc -l)"
# The session's state is split by concern (session/session_int.h): a new
# field goes into its concern's sub-struct, not back at the top.
printf '%-44s %3d\n' "top-level fields of struct session" \
	"$(awk '/^struct session \{/ { on = 1; next } on && /^\};/ { exit }
		on && /^\t[a-z].*;/ { n++ } END { print n + 0 }' session/session_int.h)"

# Call graph between object files from nm: who defines, who uses.
python3 - "$B" <<'PY'
import os, subprocess, sys, collections
b = sys.argv[1] + "/obj"
objs = [os.path.join(r, f) for r, _, fs in os.walk(b) for f in fs if f.endswith(".o")]
defs, uses = {}, collections.defaultdict(set)
for o in objs:
    out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDBR":
            defs[p[2]] = o
        elif len(p) == 2 and p[0] == "U":
            uses[o].add(p[1])
rel = lambda o: os.path.relpath(o, b)[:-2]
edges = collections.defaultdict(set)
for o, us in uses.items():
    for s in us:
        d = defs.get(s)
        if d and d != o:
            edges[rel(o)].add(rel(d))
# Plug-ins calling each other: objects that define a process-table handler
# (gs_*_proc_handler) and call into another such object.
hs = {rel(o) for s_, o in defs.items() if s_.endswith("_proc_handler")}
hh = sorted(f"{a} -> {d}" for a, ds in edges.items() if a in hs for d in ds if d in hs and d != a)
print(f"{'handler-to-handler calls':44s} {len(hh):3d}  {' '.join(hh)}")
up = sorted(f"{a} -> {d}" for a, ds in edges.items() for d in ds
            if d.startswith("cli/") and not a.startswith("cli/"))
print(f"{'calls into cli/ from other components':44s} {len(up):3d}  {' '.join(up)}")
# cycles among the engine's files, cli/ and session/ (Tarjan's strongly connected components)
eng = lambda n: n.startswith("cli/") or n.startswith("session/")
nodes = sorted(n for n in edges.keys() | {d for ds in edges.values() for d in ds} if eng(n))
idx, low, st, on, sccs, k = {}, {}, [], set(), [], [0]
def visit(v):
    idx[v] = low[v] = k[0]; k[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if not eng(w): continue
        if w not in idx: visit(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        c = []
        while True:
            w = st.pop(); on.discard(w); c.append(w)
            if w == v: break
        if len(c) > 1: sccs.append(sorted(c))
sys.setrecursionlimit(10000)
for v in nodes:
    if v not in idx: visit(v)
print(f"{'call cycles among cli/ and session/ files':44s} {len(sccs):3d}  {' | '.join(' <-> '.join(c) for c in sccs)}")
PY
