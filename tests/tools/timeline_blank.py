"""How much of one thread's timeline is blank: no sample (speedscope) or no
state slice (trace).  argv: SPEEDSCOPE_JSON TRACE_JSON TID.  Prints the
blank fraction of each over the thread's span (first to last event), as
`speedscope BLANK TOTAL` and `trace BLANK TOTAL` lines (seconds)."""
import json
import sys

ss_path, tr_path, tid = sys.argv[1], sys.argv[2], int(sys.argv[3])

ss = json.load(open(ss_path))
# profile names: "COMM pid P tid T (ROLE)"
prof = [p for p in ss["profiles"]
        if p.get("type") == "sampled" and " tid %d " % tid in p["name"] + " "]
if len(prof) != 1:
    sys.exit("speedscope: %d profiles for tid %d in %s" % (len(prof), tid, [p["name"] for p in ss["profiles"]][:20]))
p = prof[0]
# its span: the axis also runs on before the thread's birth and after its
# exit (the window ends when gpusample sees the job gone)
full = [i for i, s in enumerate(p["samples"]) if s]
if not full:
    sys.exit("speedscope: no stack for tid %d" % tid)
span = list(zip(p["samples"], p["weights"]))[full[0]:full[-1] + 1]
total = sum(w for s, w in span)
blank = sum(w for s, w in span if not s)
print("speedscope %.3f %.3f" % (blank / 1e9, total / 1e9))

tr = json.load(open(tr_path))
ev = tr["traceEvents"] if isinstance(tr, dict) else tr
st = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
            if e.get("ph") == "X" and e.get("cat") == "state" and e.get("tid") == tid)
if not st:
    sys.exit("trace: no state slices for tid %d" % tid)
covered, end = 0.0, st[0][0]
for a, b in st:
    a = max(a, end)
    if b > a:
        covered += b - a
        end = b
span = st[-1][1] - st[0][0]
print("trace %.3f %.3f" % ((span - covered) / 1e6, span / 1e6))
