#!/bin/bash
# gpusample device check: run as root on a GPU host that has only a driver,
# Python and PyTorch (everything else is in this folder, built by
# `make devkit`).  One call, under 5 minutes, every step under a timeout:
#   1. facts to diagnose: GPU, driver, profiling permission
#      (RmProfilingAdminOnly), BTF, perf events, torch and the libcupti it maps
#   2. CUPTI PC sampling alone (pcsamp_probe, no gpusample), with the keys
#      PC records carry under a registered CRC callback, functionName
#      pointers over 20 drains, Enable from a second thread under load, and
#      where a module reload's and a serialized kernel's PCs go
#   3. the workload with the agent injected but dormant: step time
#   4. the same under gpusample -p: the timed loop starts once the agent
#      reports armed; the profile is read back with `gpusample report`
#   5. summary: stall reasons, GPU samples, dropped samples, top kernels with
#      source lines, [unknown launch] share, step-time ratio armed / dormant
#   6. subscribe=arm (the default: no CUPTI until the attach) next to 4's
#      subscribe=init: armed, then detached after the timed loop and timed
#      again after the disarm; the period and hardware buffer the agent read
#      back, free device memory before the attach and while armed
#   7. an armed workload exiting while sampling under MALLOC_CHECK_=3 (a
#      write into freed heap aborts it)
#   8. step times with no agent / dormant / armed / after disarm, each with
#      card, driver, CUPTI API and torch build
#
# usage: check.sh [--double] [OUT_DIR]
#   --double  dry run on the CUDA/CUPTI doubles in double/ (no GPU, no torch)
#   OUT_DIR   where the (at most 8) output files go (default /tmp/gs-devkit.XXXXXX)
# Knobs: PYTHON (default /opt/torch/.venv/bin/python3 if present, else python3),
# STEPS (timed steps, default 200), PERIOD (--gpu-period, default 18).
# Exit: 0 every step ran and GPU samples came back, 1 otherwise.
set -u
KIT=$(cd "$(dirname "$0")" && pwd)
DOUBLE=0
[ "${1:-}" = --double ] && { DOUBLE=1; shift; }
OUT=${1:-$(mktemp -d /tmp/gs-devkit.XXXXXX)}
mkdir -p "$OUT" || exit 1
PY=${PYTHON:-$([ -x /opt/torch/.venv/bin/python3 ] && echo /opt/torch/.venv/bin/python3 || echo python3)}
STEPS=${STEPS:-200}
PERIOD=${PERIOD:-18}
GS=$KIT/gpusample
AGENT=$KIT/libgpusample_agent.so
SUM=$OUT/summary.txt
: > "$SUM"
say() { printf '%s\n' "$*" | tee -a "$SUM"; }
head_() { printf '\n== %s\n' "$*" | tee -a "$SUM"; }
FAILED=0
bad() { say "FAILED: $*"; FAILED=1; }
[ "$(id -u)" -eq 0 ] || { echo "check.sh: run as root (BPF, USDT)"; exit 1; }
if [ $DOUBLE = 1 ]; then
	LIBCUDA=$KIT/double/libcuda.so.1
	LIBCUPTI=$KIT/double/libcupti.so.13
	WL=(driver "$LIBCUDA" "$KIT/cubins")
	export GS_CUPTI_PATH=$LIBCUPTI LD_LIBRARY_PATH=$KIT/double FAKE_CUPTI_STATS=$OUT/double.stats
else
	WL=(torch)
fi

head_ "facts"
say "host $(uname -n), kernel $(uname -r), mode $([ $DOUBLE = 1 ] && echo 'dry run (CUDA/CUPTI doubles)' || echo 'real GPU')"
say "gpusample: $("$GS" --version 2>&1)"
if [ $DOUBLE = 0 ]; then
	say "GPU: $(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
	say "driver: $(head -1 /proc/driver/nvidia/version 2>&1)"
fi
say "profiling permission: $(grep -h RmProfilingAdminOnly /proc/driver/nvidia/params 2>/dev/null || echo 'no /proc/driver/nvidia/params') (1 = admin only: run the job as root)"
say "BTF: $([ -r /sys/kernel/btf/vmlinux ] && echo present || echo 'MISSING (/sys/kernel/btf/vmlinux)')"
say "perf events: perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>&1), max_sample_rate=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>&1)"
say "python: $PY ($("$PY" -V 2>&1))"
if [ $DOUBLE = 0 ]; then
	timeout 40 "$PY" - > "$OUT/workload.log" 2>&1 <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
torch.zeros(1, device="cuda")
print("device", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
import os, glob
maps = open("/proc/self/maps").read()
libs = sorted({l.split()[-1] for l in maps.splitlines() if "libcupti" in l or "libcuda.so" in l})
print("mapped:", " ".join(libs) or "no libcupti/libcuda")
tl = os.path.join(os.path.dirname(torch.__file__), "..", "nvidia")
print("torch's libcupti:", " ".join(sorted(glob.glob(os.path.join(tl, "*", "lib", "libcupti.so*")))) or "none")
PY
	tee -a "$SUM" < "$OUT/workload.log"
	LIBCUDA=libcuda.so.1
	LIBCUPTI=$(grep -o "torch's libcupti: [^ ]*" "$OUT/workload.log" | sed "s/torch's libcupti: //")
	[ -e "${LIBCUPTI:-/nonexistent}" ] || LIBCUPTI=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.* /usr/local/cuda/lib64/libcupti.so.* 2>/dev/null | head -1)
	[ -n "$LIBCUPTI" ] || LIBCUPTI=libcupti.so.13
fi

head_ "CUPTI PC sampling alone (pcsamp_probe)"
timeout 40 "$KIT/pcsamp_probe" "$LIBCUDA" "$LIBCUPTI" "$KIT/cubins/kernels_lineinfo.sm_90.cubin" 200 \
	2>&1 | tee -a "$SUM"
[ "${PIPESTATUS[0]}" = 0 ] || bad "pcsamp_probe (exit ${PIPESTATUS[0]})"
# what every number below is measured on
if [ $DOUBLE = 1 ]; then
	CARD="CUDA double" DRIVER=double TORCH="none (driver API workload)"
else
	CARD=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)
	DRIVER=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)
	TORCH=$(sed -n 's/^torch \([^ ]*\) cuda \([^ ]*\).*/\1 (CUDA \2)/p' "$OUT/workload.log" | head -1)
fi
CUPTI=$(sed -n 's/^probe: libcupti .* API \([0-9]*\).*/\1/p' "$SUM" | head -1)
ON="[card ${CARD:-?}, driver ${DRIVER:-?}, CUPTI API ${CUPTI:-?}, torch ${TORCH:-?}]"
say "versions: $ON"
free_mb() { [ $DOUBLE = 1 ] && echo "n/a (double)" || timeout 20 nvidia-smi --query-gpu=memory.free --format=csv,noheader 2>&1 | head -1; }
T_FILE=$OUT/timings.txt
: > "$T_FILE"

# start_workload LABEL [workload args]: the workload in the background,
# timed once the agent reports armed; returns once it maps the agent (the
# workload is timeout's child): sets wl (timeout's pid) and pid (its own)
start_workload() {
	local label=$1; shift
	timeout 110 "$PY" "$KIT/workload.py" "${WL[@]}" --steps "$STEPS" --wait-armed "$AGENT" \
		--label "$label" --out "$T_FILE" "$@" >> "$OUT/workload.log" 2>&1 &
	wl=$! pid=
	for _ in $(seq 300); do
		pid=$(cat "/proc/$wl/task/$wl/children" 2>/dev/null | awk '{print $1}')
		[ -n "$pid" ] && grep -q "$AGENT" "/proc/$pid/maps" 2>/dev/null && break
		sleep 0.1
	done
	[ -n "$pid" ] || bad "the $label workload did not start"
}

head_ "workload, no agent"
timeout 60 "$PY" "$KIT/workload.py" "${WL[@]}" --steps "$STEPS" --label "no agent" \
	--out "$T_FILE" >> "$OUT/workload.log" 2>&1 || bad "workload with no agent (exit $?): $(tail -2 "$OUT/workload.log")"
say "$(grep '^no agent ' "$T_FILE") $ON"

head_ "workload, agent injected and dormant"
CUDA_INJECTION64_PATH=$AGENT timeout 60 "$PY" "$KIT/workload.py" "${WL[@]}" --steps "$STEPS" \
	--label dormant --out "$T_FILE" >> "$OUT/workload.log" 2>&1 || bad "dormant workload (exit $?): $(tail -2 "$OUT/workload.log")"
say "dormant: $(grep '^dormant ' "$T_FILE") $ON"

head_ "workload under gpusample -p (timed once the agent reports armed)"
# subscribe=init: the agent subscribes to CUPTI at cuInit and keeps the
# cubins of the modules the warm-up loads before the attach (source lines);
# by default a dormant agent holds no subscription and misses them.
GS_AGENT_OPTS=subscribe=init CUDA_INJECTION64_PATH=$AGENT start_workload armed
timeout 105 "$GS" -p "${pid:-$wl}" -d 100 -q --gpu-period "$PERIOD" -o "$OUT/profile" --format pprof \
	> "$OUT/gpusample.log" 2>&1 || bad "gpusample -p (exit $?): $(tail -2 "$OUT/gpusample.log")"
wait "$wl" || bad "armed workload (exit $?): $(tail -2 "$OUT/workload.log")"
say "armed: $(grep '^armed ' "$T_FILE") $ON"
grep -i 'gpu\|agent' "$OUT/gpusample.log" | head -5 | tee -a "$SUM"

head_ "profile, read by gpusample report"
timeout 20 "$GS" report "$OUT/profile.pb.gz" > "$OUT/report.txt" 2>&1 || bad "gpusample report (exit $?)"
sed -n '/^GPU:/,/^$/p' "$OUT/report.txt" | tee -a "$SUM"
sed -n '/^Top kernels by GPU samples/,/^$/p' "$OUT/report.txt" | head -40 | tee -a "$SUM"
gpu=$(sed -n 's/.* \([0-9]*\) GPU PC samples.*/\1/p' "$OUT/report.txt" | head -1)
say "GPU samples: ${gpu:-0}"
say "dropped: $(grep -o '[0-9]* dropped[^,]*' "$OUT/report.txt" | head -3 | tr '\n' ';')"
u=$(grep -o '[0-9]* samples ([0-9.]*%) are under \[unknown launch\]' "$OUT/report.txt" | head -1)
say "[unknown launch]: ${u:-none (0% of GPU samples)}"
grep -i 'note\|GPU sampling off\|lost' "$OUT/report.txt" | head -8 | tee -a "$SUM"
[ "${gpu:-0}" -gt 0 ] || bad "no GPU samples in the profile"

head_ "subscribe=arm (default) next to subscribe=init, detached after the timed loop"
MARK=$(mktemp -u /tmp/gs-devkit-mark.XXXXXX)
say "free device memory before the attach: $(free_mb)"
# GS_AGENT_DEBUG: the agent's statuses (period and buffer read back) and
# the free memory it sized the buffer from, in workload.log
GS_AGENT_DEBUG=1 CUDA_INJECTION64_PATH=$AGENT start_workload "armed arm" --after-disarm "$MARK"
timeout 105 "$GS" -p "${pid:-$wl}" -d 100 -q --gpu-period "$PERIOD" -o "$(mktemp -u /tmp/gs-devkit-arm.XXXXXX)" \
	--format pprof >> "$OUT/gpusample.log" 2>&1 &
gs=$!
for _ in $(seq 1000); do [ -e "$MARK" ] && break; sleep 0.1; done
say "free device memory while armed: $(free_mb)"
[ -e "$MARK" ] || bad "the subscribe=arm workload never finished its armed loop"
kill -INT "$gs" 2>/dev/null
wait "$gs" || bad "gpusample -p, subscribe=arm (exit $?): $(tail -2 "$OUT/gpusample.log")"
wait "$wl" || bad "subscribe=arm workload (exit $?): $(tail -2 "$OUT/workload.log")"
rm -f "$MARK"
say "armed, subscribe=arm: $(grep '^armed arm ' "$T_FILE") $ON"
say "after disarm: $(grep '^armed arm-after-disarm ' "$T_FILE") $ON"
rb=$(grep -o 'period 2^[0-9]*, hardware buffer [0-9]* MiB' "$OUT/workload.log" | tail -1)
say "read back by the agent: ${rb:-not reported} $ON"
hw=$(grep -o '[0-9]* MiB free of [0-9]* on GPU [0-9]*: hardware buffer [0-9]* MiB' "$OUT/workload.log" | tail -1)
say "agent's sizing: ${hw:-not reported (no cuMemGetInfo at arm)} $ON"

head_ "armed workload exiting while sampling (MALLOC_CHECK_=3)"
MALLOC_CHECK_=3 GS_AGENT_OPTS=subscribe=init CUDA_INJECTION64_PATH=$AGENT start_workload "exiting armed"
timeout 105 "$GS" -p "${pid:-$wl}" -d 100 -q --gpu-period "$PERIOD" -o "$(mktemp -u /tmp/gs-devkit-exit.XXXXXX)" \
	--format pprof >> "$OUT/gpusample.log" 2>&1
wait "$wl"
rc=$?
say "exit while sampling under MALLOC_CHECK_=3: exit $rc $ON"
[ $rc = 0 ] || bad "the workload exiting while sampled ended with $rc: $(tail -2 "$OUT/workload.log")"

head_ "step time"
ms() { awk -v l="$1" 'index($0, l " step_ms ") == 1 { n = split(l, w, " "); print $(n + 2) }' "$T_FILE"; }
n=$(ms "no agent") d=$(ms dormant) a=$(ms armed) aa=$(ms "armed arm") ad=$(ms "armed arm-after-disarm")
for row in "no agent:$n" "dormant:$d" "armed (subscribe=init):$a" "armed (subscribe=arm):$aa" "after disarm:$ad"; do
	say "step time ${row%%:*}: ${row#*:} ms $ON"
done
if [ -n "$d" ] && [ -n "$a" ]; then
	say "step-time ratio armed/dormant: $(awk -v a="$a" -v d="$d" 'BEGIN{printf "%.3f (%.3f ms / %.3f ms)", a/d, a, d}')"
else
	bad "no step times"
fi
[ -n "$n" ] && [ -n "$ad" ] && say "step-time ratio after disarm/no agent: $(awk -v a="$ad" -v d="$n" 'BEGIN{printf "%.3f", a/d}')"
say ""
say "files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
[ $FAILED = 0 ] && say "device check: OK" || say "device check: FAILED"
exit $FAILED
