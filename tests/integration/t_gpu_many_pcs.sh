#!/bin/bash
# 50,000 distinct PCs lose no records (issue 15 item 7): kernels whose
# samples spread over ~51,000 distinct PCs (CUPTI double), source lines
# looked up after collection instead of in the ring-buffer loop.  Every
# sample the double delivered is in the profile, no GPU record was lost,
# every PC has its location, and the -lineinfo kernel's PCs have lines.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
export FAKE_CUPTI_PC_SPREAD=17000 FAKE_CUPTI_SAMPLES=200
gpu_run many
read -r locs lost lines < <(python3 - "$T/many.pb.gz" <<'PY'
import gzip, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i
def fields(b):
    i = 0
    while i < len(b):
        k, i = varint(b, i)
        f, t = k >> 3, k & 7
        if t == 0:
            v, i = varint(b, i); yield f, v
        elif t == 2:
            n, i = varint(b, i); yield f, b[i:i + n]; i += n
        elif t == 1: yield f, b[i:i + 8]; i += 8
        elif t == 5: yield f, b[i:i + 4]; i += 4
p = gzip.open(sys.argv[1]).read()
strs, comments, locs, gpu_lines = [], [], 0, 0
for f, v in fields(p):
    if f == 6: strs.append(v.decode())
    elif f == 13 and isinstance(v, int): comments.append(v)
    elif f == 13:  # packed
        i = 0
        while i < len(v):
            x, i = varint(v, i); comments.append(x)
    elif f == 4:
        locs += 1
        for g, w in fields(v):
            if g == 4:  # Line
                ln = dict(fields(w))
                gpu_lines += ln.get(2, 0) > 0
lost = [strs[c] for c in comments if strs[c].startswith("gpu records lost:")]
print(locs, lost[0].split()[3] if lost else "?", gpu_lines)
PY
)
n=$("$GS" report "$T/many.pb.gz" | sed -n 's/.* \([0-9]*\) GPU PC samples.*/\1/p' | head -1)
d=$(cupti_stat many samples_delivered)
echo "locations $locs (lines $lines), GPU records lost $lost, samples: $n in the profile, $d delivered"
[ "$lost" = 0 ] || fail "$lost GPU records lost"
[ "$n" = "$d" ] || fail "profile has $n GPU samples, the double delivered $d"
[ "$locs" -ge 50000 ] || fail "only $locs locations: fewer than 50,000 distinct PCs"
[ "$lines" -gt 0 ] || fail "no GPU PC got a source line"
ok "$locs locations, $n GPU samples = delivered, no GPU record lost"
