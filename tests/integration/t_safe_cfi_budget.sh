#!/bin/bash
# Issue 24, item 4: a job run as nobody maps 64 copies of a 15 KB library
# linked at 0xfff00000.  Each table's page index was sized from vaddr 0 to
# the highest address: 8 MiB of kernel memory per copy (600 copies: 4.8 GB,
# not in gpusample's RSS).  The index now spans the object's rows, so the
# tables take a few pages each, and stacks through the high library still
# unwind by its CFI (it has no frame pointers).  With a small budget
# (GS_CFI_BUDGET_MB) objects past it get no table, and the profile says so.
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
chmod 755 "$T"
mkdir "$T/u"
cat >"$T/hi.c" <<'C'
volatile unsigned long sink;
__attribute__((noinline)) static void inner_hi(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i * i; }
__attribute__((noinline)) void mid_hi(unsigned long n) { inner_hi(n); sink++; }
void spin_hi(double secs) { for (int k = 0; k < (int)(secs * 20); k++) mid_hi(20000000); sink++; }
C
gcc -O1 -fomit-frame-pointer -shared -fPIC -Wl,--build-id=none -Wl,-Ttext-segment=0xfff00000 \
	-o "$T/u/hi.so" "$T/hi.c" || fail "cc"
for i in $(seq 1 63); do cp "$T/u/hi.so" "$T/u/hi$i.so"; done
chown -R nobody:nogroup "$T/u"

start_job() {
	rm -f "$T/u/ready"
	setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes, os
d = '$T/u'
libs = [ctypes.CDLL(os.path.join(d, n)) for n in sorted(os.listdir(d)) if n.endswith('.so')]
open(os.path.join(d, 'ready'), 'w').close()
libs[0].spin_hi(ctypes.c_double(60))
" &
	job=$!
	for _ in $(seq 200); do [ -e "$T/u/ready" ] && break; sleep 0.1; done
	[ -e "$T/u/ready" ] || fail "workload did not start"
}

# Kernel memory of the rows maps in gpusample's gs_cfi_tables (found through
# its fds: the inner maps have none), in KiB.
cfi_kib() {
	python3 - "$1" <<'PY'
import json, os, subprocess, sys
pid = sys.argv[1]
outer = None
for fd in os.listdir("/proc/%s/fd" % pid):
    try:
        info = open("/proc/%s/fdinfo/%s" % (pid, fd)).read()
    except OSError:
        continue
    if "map_type:\t12" not in info:  # BPF_MAP_TYPE_ARRAY_OF_MAPS
        continue
    mid = [l.split()[1] for l in info.splitlines() if l.startswith("map_id:")][0]
    show = json.loads(subprocess.check_output(["bpftool", "-j", "map", "show", "id", mid]))
    if show.get("name") == "gs_cfi_tables":
        outer = mid
if outer is None:
    sys.exit("no gs_cfi_tables among gpusample's fds")
total = 0
for e in json.loads(subprocess.check_output(["bpftool", "-j", "map", "dump", "id", outer])):
    inner = e.get("inner_map_id") or (e.get("formatted", {}).get("value") if isinstance(e.get("formatted"), dict) else None)
    if inner is None:
        v = e.get("value")
        inner = v if isinstance(v, int) else int.from_bytes(bytes(int(x, 16) for x in v), "little") if v else None
    if not inner:
        continue
    r = subprocess.run(["bpftool", "-j", "map", "show", "id", str(inner)], capture_output=True)
    if r.returncode:
        continue  # freed meanwhile
    total += json.loads(r.stdout)["bytes_memlock"]
print(total // 1024)
PY
}

start_job
gs_start -p $job -d 8 -o "$T/out"
sleep 3 # the tables are built by then (65 small objects and python's)
kib=$(cfi_kib $gs) || fail "cannot measure the tables: $kib"
gs_wait
kill $job
echo "unwind tables of 64 copies of a library at 0xfff00000 + python: $kib KiB of BPF map memory"
[ "$kib" -lt $((64 * 1024)) ] || fail "tables take $kib KiB: the page index is sized from vaddr 0"
pprof_stacks "$T/out.pb.gz" >"$T/stacks" || fail "pprof_stacks: $(cat "$T/pprof.err")"
grep -q 'inner_hi;mid_hi;spin_hi;.*ffi_call' "$T/stacks" ||
	fail "no stack unwound from the high library by its CFI: $(grep -m3 inner_hi "$T/stacks")"
ok "page index spans the code; stacks through it unwind"

# budget_run NAME PATTERN ENV...: a 2 s run over the job under ENV; the
# run's report or the saved profile's names the loss (PATTERN).
budget_run() {
	local name=$1 pattern=$2
	shift 2
	start_job
	env "$@" "$GS" -p $job -d 2 -o "$T/$name" 2>"$T/$name.err" >"$T/$name.report" ||
		fail "gpusample: $(tail -3 "$T/$name.err")"
	kill $job
	"$GS" report "$T/$name.pb.gz" >"$T/$name.report2" 2>&1
	grep -q "$pattern" "$T/$name.report" "$T/$name.report2" ||
		fail "$name: budget loss not named: $(grep -i budget "$T/$name".*)"
}

# A 1 MiB budget: the rules array (512 KiB) and a few tables fit, the rest
# falls back to frame pointers, named in the profile.
budget_run small 'without unwind tables: over the budget of 1 MiB' GS_CFI_BUDGET_MB=1
ok "objects over the budget fall back to frame pointers, named in the report"

# The run's one memory budget (util/membudget.h) is shared with perf maps
# and GPU stores: 1 MiB of it leaves most tables out the same way, and the
# profile's budget comment counts the refusals.
budget_run shared "without unwind tables: .* or the run's shared memory budget" GS_MEM_BUDGET_MB=1
zcat "$T/shared.pb.gz" | grep -aq 'memory budget: peak [0-9.]* MiB of 1 MiB.*refused: perf maps 0, unwind tables [1-9]' ||
	fail "the profile's memory budget comment does not count the refused tables"
ok "the run's shared memory budget refuses tables past it, named and counted"
