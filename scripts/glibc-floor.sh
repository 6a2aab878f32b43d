#!/bin/bash
# The newest glibc symbol version each ELF file asks for (its dynamic
# symbol table's GLIBC_x.y references), checked against a ceiling.
#
# Usage: scripts/glibc-floor.sh MAX FILE...
# Prints "FILE: GLIBC_x.y (NEEDED: libc.so.6 ...)" per file; exits 1 when a
# file asks for a version newer than MAX (e.g. 2.31), naming the symbols,
# or needs a shared library other than glibc's.
set -euo pipefail
max=${1:?usage: glibc-floor.sh MAX FILE...}
shift
[ $# -gt 0 ] || { echo "usage: glibc-floor.sh MAX FILE..." >&2; exit 2; }
command -v objdump >/dev/null || { echo "glibc-floor: objdump missing (binutils)" >&2; exit 1; }
rc=0
for f in "$@"; do
	syms=$(objdump -T "$f") || { echo "glibc-floor: $f: not an ELF file with dynamic symbols" >&2; exit 1; }
	top=$(grep -o 'GLIBC_[0-9][0-9.]*' <<<"$syms" | sed 's/GLIBC_//' | sort -uV | tail -1)
	needed=$(objdump -p "$f" | awk '$1 == "NEEDED" {printf " %s", $2}')
	echo "$f: GLIBC_${top:-none} (NEEDED:$needed)"
	if [ -n "$top" ] && [ "$(printf '%s\n%s\n' "$top" "$max" | sort -V | tail -1)" != "$max" ]; then
		echo "glibc-floor: $f asks for glibc $top (> $max):" >&2
		grep -E 'GLIBC_[0-9.]+' <<<"$syms" | awk -v m="$max" '{
			v = $0; sub(/.*GLIBC_/, "", v); sub(/[ )].*/, "", v)
			split(v, a, "."); split(m, b, ".")
			if (a[1] > b[1] || (a[1] == b[1] && a[2] > b[2])) print "  " $NF " GLIBC_" v }' | sort -u >&2
		rc=1
	fi
	for n in $needed; do
		case $n in
		libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-*.so.*) ;;
		*)
			echo "glibc-floor: $f needs $n, which is not part of glibc" >&2
			rc=1
			;;
		esac
	done
done
exit $rc
