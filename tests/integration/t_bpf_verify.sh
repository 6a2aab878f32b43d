#!/bin/bash
# Verifier budget of the BPF object: gs_sample, gs_gpu_launch and
# gs_off_switch (sched_switch, same stack walkers) must each
# verify in well under the kernel's 1M-instruction limit (< 200k processed
# instructions), so that one more feature cannot push the object over it and
# `gpusample -p` starts at once.  Kernel 6.18, clang 14: gs_sample ~77k,
# gs_off_switch ~73k, gs_gpu_launch ~65k (98k, 95k, 87k before the row
# search became a global function; 61k, 58k, 50k before the
# unwinder's PC cache and stack windows; the native unwinder is a global BPF function, verified once per program; see
# bpf/unwind.bpf.h).  Also prints the time from start to "sampling" (not
# asserted: it depends on the machine's load).
# Reads verified_insns (kernel 5.16+) of the running gpusample's programs
# with the bpf(2) syscall (bpftool 7.1 does not print it); skips where the
# kernel does not report it.
source "$(dirname "$0")/lib.sh"
LIMIT=200000

"$WL/cpu_chain" 60 & wl=$!
t0=$(date +%s%N)
# Long enough that the programs are still loaded while they are read below
# (on a loaded machine that takes seconds); stopped with SIGINT afterwards.
gs_start -p "$wl" -d 60 -o "$T/v" -q
t1=$(date +%s%N)
echo "start to sampling: $(( (t1 - t0) / 1000000 )) ms"

# The programs of this gpusample: prog ids from its fds.
ids=$(grep -h '^prog_id:' /proc/"$gs"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u)
[ -n "$ids" ] || fail "no BPF program fds in gpusample (pid $gs)"
# prog ids -> one "name verified_insns" line each (struct bpf_prog_info: name
# at 64, verified_insns at 216, uapi offsets); ids of short-lived fds, e.g.
# libbpf feature probes, may be gone: no line for those.
prog_insns() {
	python3 - "$@" <<'PYEOF'
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_bpf = 321  # x86-64
def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    return libc.syscall(SYS_bpf, cmd, buf, 128)
for pid in sys.argv[1:]:
    fd = bpf(13, struct.pack("III", int(pid), 0, 0))  # BPF_PROG_GET_FD_BY_ID
    if fd < 0:
        continue
    info = ctypes.create_string_buffer(232)
    if bpf(15, struct.pack("IIQ", fd, 232, ctypes.addressof(info))) < 0:  # BPF_OBJ_GET_INFO_BY_FD
        sys.exit("BPF_OBJ_GET_INFO_BY_FD: errno %d" % ctypes.get_errno())
    name = info.raw[64:80].split(b"\0")[0].decode()
    print(name, struct.unpack_from("I", info.raw, 216)[0])
PYEOF
}
infos=$(prog_insns $ids) || fail "reading the programs' info failed"
kill -INT "$gs"
gs_wait
kill "$wl" 2>/dev/null
seen=0
while read -r name insns; do
	case $name in gs_sample|gs_gpu_launch|gs_off_switch) ;; *) continue;; esac
	[ "$insns" -gt 0 ] || skip "this kernel does not report verified_insns (5.16+)"
	echo "$name: $insns verified instructions"
	[ "$insns" -lt $LIMIT ] || fail "$name: $insns verified instructions (this test allows $LIMIT of the kernel's 1M)"
	seen=$((seen + 1))
done <<< "$infos"
[ $seen -eq 3 ] || fail "found $seen of gs_sample, gs_gpu_launch and gs_off_switch among the programs ($(echo $infos))"
ok "gs_sample, gs_gpu_launch and gs_off_switch verify under $LIMIT instructions"
