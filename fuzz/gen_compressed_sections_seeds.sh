#!/bin/bash
# Seed corpus for fuzz/fuzz_compressed_sections.c: a small library with
# DWARF compressed by objcopy in each form libdw inflates (zlib, GNU
# .zdebug, zstd where binutils has it), one zlib section claiming more than
# its stream holds, and a stripped one with a .gnu_debugdata xz stream.  Each seed is [8-byte little-endian size][file].
# usage: fuzz/gen_compressed_sections_seeds.sh fuzz/corpus/compressed_sections
set -eu
out=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
printf 'int g(int x) { return x * 3; }\nint f(int x) { return g(x) + 1; }\n' >"$tmp/a.c"
gcc -g -O1 -shared -fPIC -o "$tmp/a.so" "$tmp/a.c"
seed() { python3 -c 'import os,struct,sys; d=open(sys.argv[1],"rb").read(); sys.stdout.buffer.write(struct.pack("<Q",len(d))+d)' "$1" >"$out/$2"; }
for form in zlib zlib-gnu zstd; do
	objcopy --compress-debug-sections=$form "$tmp/a.so" "$tmp/$form.so" 2>/dev/null && seed "$tmp/$form.so" "$form"
done
# the first compressed section's Elf64_Chdr.ch_size raised to 64 MiB
python3 - "$tmp/zlib.so" "$tmp/forged.so" <<'PY'
import struct, sys
e = bytearray(open(sys.argv[1], "rb").read())
shoff, = struct.unpack_from("<Q", e, 0x28)
shnum, = struct.unpack_from("<H", e, 0x3c)
for i in range(shnum):
    flags, = struct.unpack_from("<Q", e, shoff + 64 * i + 8)
    if flags & 0x800:
        off, = struct.unpack_from("<Q", e, shoff + 64 * i + 24)
        struct.pack_into("<Q", e, off + 8, 64 << 20)
        break
open(sys.argv[2], "wb").write(e)
PY
seed "$tmp/forged.so" forged_claim
strip --strip-all -o "$tmp/stripped.so" "$tmp/a.so"
head -c 1M /dev/zero | xz -0 >"$tmp/mini.xz"
objcopy --add-section .gnu_debugdata="$tmp/mini.xz" "$tmp/stripped.so" "$tmp/mini.so"
seed "$tmp/mini.so" gnu_debugdata
