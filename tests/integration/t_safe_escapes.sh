#!/bin/bash
# Issue 12: strings from the target (Python qualnames and file names here)
# reach the terminal escaped, in the live report and in `gpusample report`;
# folded output stays valid UTF-8.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
"$GS" -o "$T/p" -F 199 -- /usr/bin/python3 "$ROOT/tests/workloads/py_escapes.py" 2 \
	>"$T/report" 2>"$T/gs.err" || fail "gpusample failed: $(cat "$T/gs.err")"
"$GS" report "$T/p.pb.gz" >"$T/report2" 2>>"$T/gs.err" || fail "gpusample report failed"
for f in report report2; do
	grep -q 'evil' "$T/$f" || fail "$f: the hostile function is not in the report: $(head -30 "$T/$f")"
	# no ESC, BEL, C1 CSI (U+009B) or RLO (U+202E) byte reaches the terminal
	if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2\x9b|\xe2\x80\xae' "$T/$f"; then
		fail "$f: raw control bytes reach the terminal: $(grep -a evil "$T/$f" | head -2 | od -c | head)"
	fi
	grep -qF 'evil\x1b]0;pwned\x07\x1b[31mred\u009b2J\u202egnp.exe' "$T/$f" ||
		fail "$f: escapes not shown visibly: $(grep -a evil "$T/$f" | head -2)"
done
ok "report shows: $(grep -a -m1 -o 'evil[^ ]*' "$T/report")"
"$GS" -q --format folded -o "$T/f" -F 199 -- /usr/bin/python3 "$ROOT/tests/workloads/py_escapes.py" 1 \
	2>"$T/gs.err" || fail "folded run failed: $(cat "$T/gs.err")"
iconv -f UTF-8 -t UTF-8 "$T/f.cpu.folded" >/dev/null || fail "folded output is not valid UTF-8"
LC_ALL=C grep -qP '\x1b|\x07' "$T/f.cpu.folded" && fail "folded output holds raw control bytes"
ok "folded output is valid UTF-8 without control bytes"
