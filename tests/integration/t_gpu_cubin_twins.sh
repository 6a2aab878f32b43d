#!/bin/bash
# Cubin identity (issue 15 item 2): the job loads the -lineinfo cubin and a
# twin of it with one byte of axpy's code flipped (same size, same kernel
# names; CUPTI's own sparse cuptiGetCubinCrc cannot tell them apart).  The
# agent registers gs_cubin_hash with cuptiRegisterComputeCrcCallback, so PC
# records, cubin records and the profile's mappings all carry the same full
# hash: axpy's samples land in two mappings whose build IDs are the hashes
# of the two images, computed here independently, twin_forward's samples in
# the twin's mapping and forward's in the original's.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/gpu_join_lib.sh"
GPU_APP_ARGS=--twin gpu_run twin
P=$T/twin.pb.gz

# gs_cubin_hash (include/gpusample/records.h) of the original and the twin
read -r h_orig h_twin < <(python3 - "$ROOT/tests/fakes/cubins/kernels_lineinfo.sm_90.cubin" <<'PY'
import struct, sys
M = (1 << 64) - 1
def gs_cubin_hash(p):
    n = len(p)
    h = 0xcbf29ce484222325 ^ ((n * 0x9e3779b97f4a7c15) & M)
    i = 0
    while i + 8 <= n:
        w, = struct.unpack_from("<Q", p, i)
        h = ((h ^ w) * 0xff51afd7ed558ccd) & M
        h = ((h << 31) | (h >> 33)) & M
        i += 8
    while i < n:
        h = ((h ^ p[i]) * 0x100000001b3) & M
        i += 1
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & M
    h ^= h >> 33
    return h or 1
img = open(sys.argv[1], "rb").read() + b"\0"   # as gpu_app hands it over
b = bytearray(img)
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
sh = lambda i: struct.unpack_from("<IIQQQQ", b, shoff + i * shentsize)
stroff = sh(shstrndx)[4]
for i in range(shnum):
    name, _, _, _, off, size = sh(i)
    if b[stroff + name:b.index(b"\0", stroff + name)] == b".text.axpy":
        b[off + size // 2] ^= 1
print("%016x %016x" % (gs_cubin_hash(img[:-1]), gs_cubin_hash(bytes(b[:-1]))))
PY
)
[ -n "$h_twin" ] && [ "$h_orig" != "$h_twin" ] || fail "cannot compute the twins' hashes"
tests/tools/pprof_stacks.py "$P" -sample_index=gpu_samples > "$T/stacks" || fail "pprof -traces failed"
go tool pprof -raw "$P" > "$T/raw" 2>/dev/null || fail "pprof -raw failed"
echo "hashes: original $h_orig, twin $h_twin"
grep -E "cubin|$h_orig|$h_twin" "$T/raw" | grep -iE "build|mapping|^ *[0-9]+: " | head -8
grep -q "$h_orig" "$T/raw" || fail "no mapping with the original cubin's hash $h_orig"
grep -q "$h_twin" "$T/raw" || fail "no mapping with the twin cubin's hash $h_twin: twins merged"
read -r tw_all < <(awk -F'\t' '$3 ~ /^axpy;/ && $3 ~ /;twin_forward;/ {s += $1} END {print s+0}' "$T/stacks")
read -r fw_all < <(awk -F'\t' '$3 ~ /^axpy;/ && $3 ~ /;forward;/ {s += $1} END {print s+0}' "$T/stacks")
[ "$tw_all" -gt 0 ] && [ "$fw_all" -gt 0 ] || fail "axpy samples missing under forward ($fw_all) or twin_forward ($tw_all)"
ok "near-identical cubins kept apart: mappings $h_orig and $h_twin; axpy $fw_all samples under forward, $tw_all under twin_forward"
