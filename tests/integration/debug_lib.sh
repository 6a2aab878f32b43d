# Helpers for the debug-data tests (sourced after lib.sh).

# debug_bomb IN OUT CLAIM_MIB N: OUT is the ELF64 IN plus N SHF_COMPRESSED
# (zlib) .debug_* sections, each a real zlib stream of CLAIM_MIB MiB of zeros
# (about CLAIM_MIB KiB on disk; the N sections share the one stream), as a
# hostile job's library: libdw inflates every one whole when it opens the
# file's DWARF.
debug_bomb() {
	python3 - "$@" <<'PY' || fail "debug_bomb $*"
import struct, sys, zlib
src, dst, mib, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
e = bytearray(open(src, "rb").read())
assert e[:4] == b"\x7fELF" and e[4] == 2 and e[5] == 1, "ELF64 LE only"
shoff, = struct.unpack_from("<Q", e, 0x28)
shnum, shstrndx = struct.unpack_from("<HH", e, 0x3c)
sh = [bytearray(e[shoff + 64 * i:shoff + 64 * (i + 1)]) for i in range(shnum)]
so, ss = struct.unpack_from("<QQ", sh[shstrndx], 0x18)
strtab = bytearray(e[so:so + ss])
z = zlib.compressobj(9)
chunk = bytes(1 << 20)
data = b"".join(z.compress(chunk) for _ in range(mib)) + z.flush()
blob = struct.pack("<IIQQ", 1, 0, mib << 20, 1) + data  # Elf64_Chdr, ELFCOMPRESS_ZLIB

def put(b):
    e.extend(bytes(-len(e) % 8))
    at = len(e)
    e.extend(b)
    return at

at = put(blob)
names = [".debug_info", ".debug_abbrev", ".debug_str", ".debug_line", ".debug_loclists",
         ".debug_rnglists", ".debug_aranges", ".debug_frame"][:n]
for name in names:
    off = len(strtab)
    strtab.extend(name.encode() + b"\0")
    sh.append(bytearray(struct.pack("<IIQQQQIIQQ", off, 1, 0x800, 0, at, len(blob), 0, 0, 1, 0)))
struct.pack_into("<QQ", sh[shstrndx], 0x18, put(strtab), len(strtab))
struct.pack_into("<Q", e, 0x28, put(b"".join(sh)))
struct.pack_into("<H", e, 0x3c, len(sh))
open(dst, "wb").write(e)
PY
}


# nobody_py LIB FUNC: a job run as nobody, Python calling LIB's FUNC(); its
# pid in $job.
nobody_py() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes
ctypes.CDLL('$1').$2()
" &
	job=$!
	sleep 1
	kill -0 $job 2>/dev/null || fail "job ($2) did not start"
}

# stop_timed SIG PID WHAT: send SIG to our child PID and wait for it to end
# (at most 10 s, else fail): how long it took in $ms, its status in $rc.
stop_timed() {
	kill -"$1" "$2"
	local t0
	t0=$(date +%s%N)
	for _ in $(seq 1 100); do kill -0 "$2" 2>/dev/null || break; sleep 0.1; done
	ms=$((($(date +%s%N) - t0) / 1000000))
	kill -0 "$2" 2>/dev/null && fail "$3: SIG$1 ignored (still running after ${ms} ms)"
	wait "$2"
	rc=$?
}

# dump_cut_check SIG PREFIX: a dump stopped by SIG (stop_timed) ended within
# 2.5 s and wrote PREFIX.pb.gz, whose report (PREFIX.rep) notes the cut.
dump_cut_check() {
	[ -s "$2.pb.gz" ] || fail "dump: SIG$1 left no profile (rc $rc): $(tail -3 "$2.err")"
	[ "$ms" -lt 2500 ] || fail "dump: SIG$1 took ${ms} ms to end it"
	"$GS" report "$2.pb.gz" >"$2.rep" 2>&1 || fail "dump report: $(tail -3 "$2.rep")"
	grep -q "dump cut short by SIG$1" "$2.rep" ||
		fail "dump: no note of the cut: $(grep -i 'cut\|debug' "$2.rep")"
}
