#!/bin/bash
# Issue 25 item 2: names instead of noise, on the demo's workload (a real
# PyTorch CPU training loop, Debian 12's stripped python3.11 and libtorch).
#  - the report's top 5 functions by self CPU hold no "lib+0x..." offset and
#    no interrupt-enable skid frame (pvm_irq_enable on this VM);
#  - the report names the sampling event: cycles where a PMU exists, else
#    cpu-clock (this VM has no PMU: only the fallback can be checked here);
#  - flame graphs (the folded file; pprof, speedscope and trace take the
#    same merged stacks) hold no interpreter frame between two Python
#    frames, and --interpreter-frames brings them back.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || fail "python3-torch is not installed (make test-deps)"
"$GS" -o "$T/d" --format pprof,folded -- \
	/usr/bin/python3 tests/workloads/train_torch.py --seconds 6 --workers 2 > "$T/report" ||
	fail "gpusample exited with $?"
sed -n '/^gpusample report/,/^Processes/p' "$T/report"
top5=$(sed -n '/^Top functions by self CPU/,/^$/p' "$T/report" | sed -n '3,7p')
[ -n "$top5" ] || fail "no top-functions table"
echo "$top5" | grep -E '\+0x[0-9a-f]' && fail "an address offset among the top 5 functions"
echo "$top5" | grep -E '_irq_enable|__raw_callee_save_|_unlock_irqrestore' &&
	fail "an interrupt-enable skid frame among the top 5 functions"
totals=$(sed -n '/^Top functions by total CPU/,/^$/p' "$T/report")
echo "$totals" | grep -E '  (_start|__libc_start_main|__libc_start_call_main|Py_BytesMain|PyEval_EvalCode|start_thread|clone3?|\[process .*\])$' &&
	fail "a thread root or interpreter entry frame in the totals table"
event=$(grep -oE '^  duration [^,]*, [0-9]+ Hz [a-z-]+' "$T/report" | awk '{print $NF}')
if perf_cycles=$(python3 - <<'PY'
import ctypes, os, struct
# perf_event_attr (size 128): type 0 = PERF_TYPE_HARDWARE, config 0 = CPU_CYCLES
attr = bytearray(128)
struct.pack_into("IIQ", attr, 0, 0, 128, 0)
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(bytes(attr), 128)
fd = libc.syscall(298, buf, -1, 0, -1, 0)  # perf_event_open(attr, pid -1, cpu 0)
print("yes" if fd >= 0 else "no")
PY
); then :; fi
echo "sample event in the report: $event (hardware cycles open here: $perf_cycles)"
if [ "$perf_cycles" = no ]; then
	[ "$event" = cpu-clock ] || fail "no PMU here, but the report says the event was '$event'"
else
	[ "$event" = cycles ] || fail "a PMU is here, but the report says the event was '$event'"
fi
# Interpreter frames between two Python frames of one folded stack.
between() {
	awk '{
		sub(/ [0-9]+$/, ""); n = split($0, f, ";"); first = 0; last = 0
		for (i = 1; i <= n; i++) if (f[i] ~ / \([^()]*:[0-9]+\)$/) { if (!first) first = i; last = i }
		for (i = first + 1; i < last; i++)
			if (f[i] ~ /^(_?Py[A-Z][A-Za-z_]*|python3\.[0-9]+\+0x[0-9a-f]+)$/) print f[i]
	}' "$1" | sort | uniq -c | sort -rn
}
between "$T/d.cpu.folded" > "$T/between"
[ -s "$T/between" ] && { head "$T/between"; fail "interpreter frames between Python frames by default"; }
"$GS" -o "$T/i" -q --interpreter-frames --format folded -- \
	/usr/bin/python3 tests/workloads/train_torch.py --seconds 3 --workers 0 > /dev/null ||
	fail "gpusample --interpreter-frames exited with $?"
between "$T/i.cpu.folded" > "$T/between_i"
head -5 "$T/between_i"
grep -q '_PyEval_EvalFrameDefault\|python3\.[0-9]*+0x' "$T/between_i" ||
	fail "--interpreter-frames did not keep the interpreter's frames between Python frames"
ok "top 5 named ($(echo "$top5" | awk '{print $5}' | paste -sd' ')), event $event, interpreter frames folded; --interpreter-frames keeps $(wc -l < "$T/between_i") kinds"
