#!/bin/bash
# Counts of the middle layer's shape, for the design notes and reviews:
# readers, tables and helpers that should exist once, and the call graph
# between components (from the objects' symbols, not from greps of calls).
#   scripts/arch-counts.sh [BUILD]     (BUILD defaults to build/; run `make` first)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
SRC="bpf cli symbolizer output gpu_sampler $( [ -d proc ] && echo proc || true ) util"
c() { grep -rlE "$1" --include=*.c --include=*.h $SRC 2>/dev/null | grep -v '\.bpf\.' | grep -vE "${2:-^$}" || true; }
show() { local n; n=$(printf '%s\n' "$2" | grep -c . || true); printf '%-44s %3d  %s\n' "$1" "$n" "$(echo $2)"; }

show "readers of /proc/PID/maps"       "$(c '"/proc/%[ud]/maps"')"
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
up = sorted(f"{a} -> {d}" for a, ds in edges.items() for d in ds
            if d.startswith("cli/") and not a.startswith("cli/"))
print(f"{'calls into cli/ from other components':44s} {len(up):3d}  {' '.join(up)}")
# cycles among cli/ files (Tarjan's strongly connected components)
nodes = sorted(n for n in edges.keys() | {d for ds in edges.values() for d in ds} if n.startswith("cli/"))
idx, low, st, on, sccs, k = {}, {}, [], set(), [], [0]
def visit(v):
    idx[v] = low[v] = k[0]; k[0] += 1; st.append(v); on.add(v)
    for w in edges.get(v, ()):
        if not w.startswith("cli/"): continue
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
print(f"{'call cycles among cli/ files':44s} {len(sccs):3d}  {' | '.join(' <-> '.join(c) for c in sccs)}")
PY
