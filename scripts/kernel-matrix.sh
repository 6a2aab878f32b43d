#!/bin/bash
# Kernel matrix (issue 21 item 4): do gpusample's BPF programs load and work on
# the kernels its users run?  Boots Debian's own signed cloud kernels under
# QEMU (software emulation: no KVM needed) with an initramfs holding
# build/gpusample, the test workloads and a Python, runs
# scripts/kernel-matrix-checks.sh in each guest and natively ("host"), and
# prints a table: kernel x program (instructions the verifier processed),
# then the C chain, Python chain and off-CPU results.
#
#   sudo scripts/kernel-matrix.sh [KERNEL...]     KERNEL: 5.10 6.1 6.12 7 host
#                                                 (default all), or SUITE:VERSION-PREFIX
#   sudo scripts/kernel-matrix.sh --fetch         only download what is missing
#
# Exit 1 on a load failure, a boot that did not finish, a missing chain, a
# program over the budget of verified instructions, or a missing prerequisite.
# A kernel that lacks a feature is not a failure where gpusample says so.
#
# Downloads go through a private apt configuration per suite under the cache
# (the system's apt lists, status and archives are never touched), from the
# mirror of the machine's own apt sources; the second run downloads nothing
# (GS_KERNEL_REFRESH=1 looks for newer kernels).
# Environment: GS_KERNEL_CACHE (default /var/cache/gpusample/kernels), BUILD
# (default build), GS_MATRIX_OUT (logs, initramfs; default $BUILD/kernel-matrix),
# GS_MATRIX_JOBS (QEMUs at once; default: the CPU count, each TCG guest uses
# one host thread), GS_MATRIX_BOOT_TIMEOUT (s, default 300), GS_MATRIX_BUDGET
# (default 200000), GS_MATRIX_PYTHON (default /usr/bin/python3's target),
# GS_DEBIAN_MIRROR / GS_DEBIAN_SECURITY (override the mirror read from /etc/apt).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${BUILD:-build}
CACHE=${GS_KERNEL_CACHE:-/var/cache/gpusample/kernels}
OUT=${GS_MATRIX_OUT:-$ROOT/$BUILD/kernel-matrix}
JOBS=${GS_MATRIX_JOBS:-$(nproc)}
BOOT_TIMEOUT=${GS_MATRIX_BOOT_TIMEOUT:-300}
BUDGET=${GS_MATRIX_BUDGET:-200000}
PY=${GS_MATRIX_PYTHON:-$(readlink -f /usr/bin/python3)}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
ALL="5.10 6.1 6.12 7 host"

die() { echo "kernel-matrix: $*" >&2; exit 1; }
note() { echo "kernel-matrix: $*" >&2; }

fetch_only=0
kernels=()
for a in "$@"; do
	case $a in
	--fetch) fetch_only=1 ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $a" ;;
	*) kernels+=("$a") ;;
	esac
done
[ ${#kernels[@]} -gt 0 ] || read -ra kernels <<< "$ALL"

# kernel_spec KERNEL: "SUITE VERSION-PREFIX" of a matrix entry.
kernel_spec() {
	case $1 in
	5.10 | bullseye) echo "bullseye 5.10." ;;
	6.1 | bookworm) echo "bookworm 6.1." ;;
	6.12 | trixie) echo "trixie 6.12." ;;
	7 | 7.x | sid) echo "sid 7." ;;
	*:*) echo "${1%%:*} ${1#*:}" ;;
	*) return 1 ;;
	esac
}

# ---- prerequisites: missing ones fail (make test-deps installs them) ---
[ "$(id -u)" -eq 0 ] || die "run as root (sudo): gpusample needs it, natively and for the cache"
for c in apt-get apt-cache dpkg-deb qemu-system-x86_64 cpio gzip timeout ldd; do
	command -v "$c" >/dev/null || die "$c missing (sudo make test-deps)"
done
BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && [[ $(ldd "$BUSYBOX" 2>&1) == *"not a dynamic"* ]] ||
	die "a static busybox is needed (busybox-static; sudo make test-deps)"
[ -r "$KEYRING" ] || die "$KEYRING missing (debian-archive-keyring)"
if [ "$fetch_only" = 0 ]; then
	for f in "$BUILD/gpusample" "$BUILD/workloads/cpu_chain"; do
		[ -x "$f" ] || die "$f missing (make)"
	done
	[ -x "$PY" ] || die "python $PY missing"
fi

# ---- the Debian mirror this machine uses ------------------------------------
# shellcheck source=scripts/debian-mirror.sh
source "$ROOT/scripts/debian-mirror.sh"
MIRROR=$(debian_mirror) || exit 1
SECURITY=$(debian_security) || exit 1

# ---- private apt, one per suite ---------------------------------------------
# apt_for SUITE: sets APT to the options that make apt-get / apt-cache use
# only $CACHE/apt/SUITE (own sources, lists, archives, an empty status).
apt_for() {
	local d=$CACHE/apt/$1
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/etc/preferences.d"
	[ -f "$d/status" ] || : > "$d/status"
	{
		echo "deb [signed-by=$KEYRING] $MIRROR $1 main"
		# Stable suites get kernel updates through the security archive.
		[ "$1" = sid ] || echo "deb [signed-by=$KEYRING] $SECURITY $1-security main"
	} > "$d/sources.list"
	APT=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=-
		-o "Dir::Etc::preferencesparts=$d/etc/preferences.d" -o "Dir::Etc::preferences=$d/etc/preferences"
		-o "Dir::State::Lists=$d/lists" -o "Dir::State::status=$d/status"
		-o "Dir::State::extended_states=$d/extended_states" -o "Dir::Cache=$d/cache"
		-o APT::Architecture=amd64 -o APT::Architectures::=amd64 -o Acquire::Languages=none
		-o APT::Sandbox::User=root -q)
	APTDIR=$d
}

# fetch_kernel KERNEL: downloads (once) and unpacks (once) the newest cloud
# kernel of the entry; sets KDIR to the folder with vmlinuz and config.
fetch_kernel() {
	local spec suite prefix res pkg ver deb
	spec=$(kernel_spec "$1") || { note "unknown kernel '$1' (use: $ALL, or SUITE:VERSION-PREFIX)"; return 1; }
	read -r suite prefix <<< "$spec"
	apt_for "$suite"
	res=$CACHE/resolved/$suite-$prefix
	if [ -n "${GS_KERNEL_REFRESH:-}" ] || [ ! -s "$res" ]; then
		if [ -n "${GS_KERNEL_REFRESH:-}" ] || ! ls "$APTDIR/lists/"*_Packages* >/dev/null 2>&1; then
			apt-get "${APT[@]}" update >"$APTDIR/update.log" 2>&1 ||
				{ note "$suite: apt-get update failed: $(tail -3 "$APTDIR/update.log")"; return 1; }
		fi
		mkdir -p "$CACHE/resolved"
		local names
		names=$(apt-cache "${APT[@]}" pkgnames linux-image- | grep -E '^linux-image-[0-9][^ ]*-cloud-amd64$')
		[ -n "$names" ] || { note "$suite: no linux-image-*-cloud-amd64 package"; return 1; }
		# shellcheck disable=SC2086
		apt-cache "${APT[@]}" show $names 2>/dev/null |
			awk -v p="$prefix" '/^Package:/ { n = $2 } /^Version:/ && index($2, p) == 1 { print $2, n }' |
			sort -V | tail -1 | awk '{ print $2, $1 }' > "$res.tmp"
		[ -s "$res.tmp" ] || { note "$suite: no cloud kernel $prefix*"; rm -f "$res.tmp"; return 1; }
		mv "$res.tmp" "$res"
	fi
	read -r pkg ver < "$res"
	KDIR=$CACHE/unpacked/${pkg}_$ver
	[ -f "$KDIR/done" ] && return 0
	mkdir -p "$CACHE/debs"
	rm -rf "$KDIR" && mkdir -p "$KDIR/x"
	# linux-image-* holds /boot/vmlinuz-* and /boot/config-* up to trixie;
	# from 7.x (sid) it is an empty package that depends on
	# linux-binary-* / linux-base-* (same version), which hold them.  The
	# modules are never needed (BPF, BTF, virtio and the serial console are
	# built in) and are most of the size.
	local todo=("$pkg") p deps
	while [ ${#todo[@]} -gt 0 ]; do
		p=${todo[0]} && todo=("${todo[@]:1}")
		deb=$CACHE/debs/${p}_${ver//:/%3a}_amd64.deb
		if [ ! -s "$deb" ]; then
			note "downloading $p $ver ($suite)"
			(cd "$CACHE/debs" && apt-get "${APT[@]}" download "$p=$ver") >"$APTDIR/download.log" 2>&1 ||
				{ note "$p: apt-get download failed: $(tail -3 "$APTDIR/download.log")"; return 1; }
		fi
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$KDIR/x" --exclude='*/modules/*/kernel' ||
			{ note "$p: cannot unpack $deb"; return 1; }
		if [ "$p" = "$pkg" ]; then
			deps=$(dpkg-deb -f "$deb" Depends | tr ',|' '\n\n' |
				sed -n "s/^ *\(linux-\(binary\|base\)-[^ ]*\) *(= ${ver//./\\.}).*/\1/p")
			[ -z "$deps" ] || read -ra todo <<< "$(echo $deps)"
		fi
	done
	# /boot/{vmlinuz,config}-RELEASE, or (7.x) /usr/lib/modules/RELEASE/{vmlinuz,config}
	local vmlinuz config rel
	vmlinuz=$(find "$KDIR/x" \( -path '*/boot/vmlinuz-*' -o -path '*/lib/modules/*/vmlinuz' \) -type f | head -1)
	case $vmlinuz in
	*/boot/vmlinuz-*) rel=${vmlinuz##*/vmlinuz-} config=${vmlinuz%/*}/config-${vmlinuz##*/vmlinuz-} ;;
	*) rel=${vmlinuz%/vmlinuz} rel=${rel##*/} config=${vmlinuz%/*}/config ;;
	esac
	[ -n "$vmlinuz" ] && [ -f "$config" ] ||
		{ note "$pkg: no vmlinuz / config in the packages"; return 1; }
	mv "$vmlinuz" "$KDIR/vmlinuz" && mv "$config" "$KDIR/config" && echo "$rel" > "$KDIR/release" &&
		rm -rf "$KDIR/x" && echo "$pkg $ver" > "$KDIR/done"
}

declare -A KDIRS=()
fetch_failed=""
for k in "${kernels[@]}"; do
	[ "$k" = host ] && continue
	if fetch_kernel "$k"; then KDIRS[$k]=$KDIR; else fetch_failed="$fetch_failed $k"; fi
done
if [ "$fetch_only" = 1 ]; then
	for k in "${!KDIRS[@]}"; do echo "$k: $(cat "${KDIRS[$k]}/done") in ${KDIRS[$k]}"; done
	[ -z "$fetch_failed" ] || die "could not fetch:$fetch_failed"
	exit 0
fi

# ---- the initramfs (one for all kernels) ------------------------------------
mkdir -p "$OUT"
build_initramfs() {
STAGE=$OUT/initramfs
rm -rf "$STAGE" && mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,root,etc,boot,gs/wl}
# copy_libs FILE: the shared libraries ldd names for FILE, at their paths.
copy_libs() {
	local l
	for l in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		[ -e "$STAGE$l" ] || { mkdir -p "$STAGE$(dirname "$l")" && cp -L "$l" "$STAGE$l"; } || return 1
	done
}
# copy_with_libs FILE: FILE at its path, and its libraries.
copy_with_libs() { mkdir -p "$STAGE$(dirname "$1")" && cp -L "$1" "$STAGE$1" && copy_libs "$1"; }
cp "$BUSYBOX" "$STAGE/bin/busybox"
for a in $("$BUSYBOX" --list-full); do
	[ -e "$STAGE/$a" ] || ln -s /bin/busybox "$STAGE/$a"
done
# gpusample and the GPU agent it looks for next to itself (as installed).
for f in gpusample libgpusample_agent.so; do
	[ -e "$BUILD/$f" ] || continue
	cp -L "$BUILD/$f" "$STAGE/gs/$f" && copy_libs "$BUILD/$f" || die "cannot copy $BUILD/$f"
done
cp "$BUILD/workloads/cpu_chain" tests/workloads/py_chain.py tests/workloads/py_common.py "$STAGE/gs/wl/"
cp scripts/kernel-matrix-checks.sh "$STAGE/gs/checks.sh"
# Python: the interpreter at its own path (it finds its stdlib from there)
# and the stdlib modules the workloads import (as the host's python imports
# them with -S, as the guest runs them), encodings whole, lib-dynload's
# modules that were loaded; precompiled so TCG does not compile them at
# every start.
copy_with_libs "$PY" || die "cannot copy $PY"
pymods=$(GS_SECONDS=0 "$PY" -S - "$ROOT/tests/workloads/py_chain.py" <<'EOF'
import os, sys, time
path = sys.argv[1]
sys.argv = [path]
exec(compile(open(path).read(), path, "exec"), {"__name__": "__main__", "__file__": path})
std = sys._stdlib_dir
print(os.path.join(std, "lib-dynload/"))
print(os.path.join(std, "encodings/"))
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f and f.startswith(std + "/"):
        print(f)
EOF
) || die "$PY cannot run tests/workloads/py_chain.py"
for f in $pymods; do
	case $f in
	*/lib-dynload/) mkdir -p "$STAGE$f" ;;
	*/encodings/) mkdir -p "$STAGE$f" && cp "$f"*.py "$STAGE$f" ;;
	*.so) copy_with_libs "$f" ;;
	*) mkdir -p "$STAGE$(dirname "$f")" && cp "$f" "$STAGE$f" ;;
	esac || die "cannot copy $f"
done
"$PY" -S -m compileall -q -s "$STAGE" -p / "$STAGE$(dirname "$(echo "$pymods" | head -1)")" >/dev/null ||
	die "cannot precompile the Python modules"
# libbpf reads /boot/config-RELEASE for __kconfig externs.
for k in "${!KDIRS[@]}"; do cp "${KDIRS[$k]}/config" "$STAGE/boot/config-$(cat "${KDIRS[$k]}/release")"; done
echo "root:x:0:0:root:/root:/bin/sh" > "$STAGE/etc/passwd"
echo "root:x:0:" > "$STAGE/etc/group"
cat > "$STAGE/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
hostname gsm-guest
# Keep kernel messages off the console from here on: they would split the
# GSM lines the host parses.
dmesg -n 1
GS=/gs/gpusample WL=/gs/wl PYWL=/gs/wl PY=@PY@ OUT=/tmp/gsm sh /gs/checks.sh
echo "GSM dmesg $(dmesg | grep -i -E 'bpf|panic|oops|bug:' | tail -n 3 | tr '\n' '|')"
poweroff -f
EOF
sed -i "s|@PY@|$PY|" "$STAGE/init"
chmod +x "$STAGE/init"
(cd "$STAGE" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 > "$INITRD") ||
	die "cannot build the initramfs"
note "initramfs $(du -h "$INITRD" | cut -f1) (gpusample $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null))"
}
INITRD=$OUT/initramfs.cpio.gz
[ ${#KDIRS[@]} -eq 0 ] || build_initramfs

# ---- runs ---------------------------------------------------------------------
# run_one KERNEL: its GSM lines in $OUT/KERNEL.log (the whole console in
# $OUT/KERNEL.console), its seconds in $OUT/KERNEL.secs.
run_one() {
	local k=$1 start=$SECONDS tmp=""
	# Each run under timeout(1), which signals its whole process group, so
	# that the cleanup below can end a run by that one pid.
	if [ "$k" = host ]; then
		tmp=$(mktemp -d /tmp/gs-matrix.XXXXXX)
		GS=$ROOT/$BUILD/gpusample WL=$ROOT/$BUILD/workloads PYWL=$ROOT/tests/workloads PY=$PY \
			OUT=$tmp timeout -k 10 "$BOOT_TIMEOUT" sh scripts/kernel-matrix-checks.sh \
			> "$OUT/$k.console" 2>&1 &
		echo $! > "$OUT/$k.pid"
		wait $!
	else
		local d=${KDIRS[$k]} try
		for try in 1 2; do
			# 2 CPUs: the verifier's count depends on the CPU count; one
			# host thread for both (thread=single) avoided an occasional
			# boot panic; no_timer_check: on a busy host the emulated
			# 8254 can miss the kernel's IO-APIC timer test ("IO-APIC +
			# timer doesn't work!" panic, seen on 6.12).
			timeout -k 10 "$BOOT_TIMEOUT" qemu-system-x86_64 -accel tcg,thread=single -smp 2 -m 2G \
				-nographic -no-reboot -kernel "$d/vmlinuz" -initrd "$INITRD" \
				-append "console=ttyS0 panic=-1 loglevel=4 no_timer_check" \
				< /dev/null > "$OUT/$k.console" 2>&1 &
			echo $! > "$OUT/$k.pid"
			wait $!
			# A guest that never reached /init (an emulation hiccup, not
			# gpusample's doing) gets one more boot; its console is kept.
			grep -q -a 'GSM kernel' "$OUT/$k.console" && break
			[ "$try" = 2 ] || { mv "$OUT/$k.console" "$OUT/$k.console.boot1"; note "$k: no /init, booting again"; }
		done
	fi
	rm -f "$OUT/$k.pid"
	[ -z "$tmp" ] || rm -rf "$tmp"
	echo $((SECONDS - start)) > "$OUT/$k.secs"
	tr -d '\r' < "$OUT/$k.console" | grep -o 'GSM .*' > "$OUT/$k.log"
}

# Interrupted (Ctrl-C, the test's timeout): end the runs still going.
cleanup() {
	local f
	for f in "$OUT"/*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
}
trap 'cleanup; exit 1' INT TERM
todo=()
for k in "${kernels[@]}"; do
	if [ "$k" = host ] || [ -n "${KDIRS[$k]:-}" ]; then todo+=("$k"); fi
done
for k in "${todo[@]}"; do
	rm -f "$OUT/$k.log" "$OUT/$k.secs"
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
	run_one "$k" &
done
wait

# ---- the table ----------------------------------------------------------------
# One row per kernel; a row fails on: no "GSM done" (boot or checks did not
# finish), check rc != 0 (a load failure: its error text is printed), a
# program over the budget, chain/python/offcpu "fail".  "na" (gpusample said
# the kernel cannot do it) and "skip" (after a load failure) are not failures
# of their own.
rows=$OUT/rows.tsv
: > "$rows"
for k in "${kernels[@]}"; do
	if [ -n "${KDIRS[$k]:-}" ]; then rel=$(cat "${KDIRS[$k]}/release"); else rel=$(uname -r); fi
	if [[ " $fetch_failed " == *" $k "* ]]; then
		printf '%s\t-\t-\t\t\t\t\t\tFAIL\tkernel not fetched (above)\n' "$k" >> "$rows"
		continue
	fi
	awk -F'\t' -v k="$k" -v rel="$rel" -v secs="$(cat "$OUT/$k.secs" 2>/dev/null)" -v budget="$BUDGET" '
	{ line = $0; sub(/^GSM /, "", line); split(line, w, " ") }
	w[1] == "kernel" { rel = w[2] }
	w[1] == "time" && w[2] == "start" && k != "host" { boot = int(w[3] + 0.5) }
	w[1] == "program" { progs = progs (progs == "" ? "" : ",") w[2] "=" w[3]
	                    if (w[3] ~ /^[0-9]+$/ && w[3] + 0 > budget) { bad = bad "; " w[2] " " w[3] " insns > " budget }
	                    else if (w[3] !~ /^[0-9]+$/) { bad = bad "; " w[2] ": no verifier count (" w[3] ")" } }
	w[1] == "feature" && w[3] != "yes" { nofeat = nofeat (nofeat == "" ? "" : ",") w[2] }
	# the check'"'"'s error lines first, else its first lines
	w[1] == "checkmsg" && nmsg++ < 3 { msg = msg (msg == "" ? "" : " / ") substr(line, 10) }
	w[1] == "checkmsg" && tolower(line) ~ /fail|error|cannot|refused|too large|timed out|not supported/ && nerr++ < 3 {
		err = err (err == "" ? "" : " / ") substr(line, 10) }
	w[1] == "check" && w[2] == "rc" { rc = w[3] }
	# add(TEXT): a failure reason, once (the same load error comes from
	# several steps).
	function add(t) { if (index(bad, t) == 0) bad = bad "; " t }
	w[1] ~ /^(chain|python|offcpu)$/ { r[w[1]] = substr(line, length(w[1]) + 2)
	                                   if (w[2] == "fail") add(w[1] " " substr(line, length(w[1]) + 2)) }
	w[1] == "log" && nlog[w[2]]++ < 2 && index(bad, substr(line, length(w[2]) + 6)) == 0 {
		logs = logs "; " w[2] ": " substr(line, length(w[2]) + 6) }
	w[1] == "done" { done = 1 }
	END {
		if (!done) bad = bad "; did not finish (boot failed, panic or timeout: see the .console file)"
		if (rc != "" && rc != 0) bad = "; load failure (gpusample check rc=" rc "): " (err != "" ? err : msg) bad
		printf "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k, rel, boot == "" ? "-" : boot, secs, progs, nofeat,
			r["chain"], r["python"], r["offcpu"], bad == "" ? "ok" : "FAIL", substr(bad logs, 3)
	}' "$OUT/$k.log" >> "$rows"
done
# Programs as columns, in first-seen order; a program a kernel did not report is "-".
awk -F'\t' '
NR == FNR { n = split($4, p, ","); for (i = 1; i <= n; i++) { split(p[i], kv, "=")
              if (!(kv[1] in col)) { col[kv[1]] = ++nc; name[nc] = kv[1] } }
            next }
function cell(s) { return s == "" ? "-" : s }
# "ok 281/281" / "ok 9" / "fail 12/80" where there is a count, else the verdict alone.
function short(s,   w) { split(s, w, " "); return w[1] == "" ? "-" : w[2] ~ /^[0-9]+(\/[0-9]+)?$/ ? w[1] " " w[2] : w[1] }
FNR == 1 { printf "%-8s %-26s %7s", "kernel", "release", "boot/s"
           for (i = 1; i <= nc; i++) printf " %*s", length(name[i]) < 7 ? 7 : length(name[i]), name[i]
           printf "  %-16s %-16s %-10s %s\n", "chain", "python", "offcpu", "result" }
{ delete v; n = split($4, p, ","); for (i = 1; i <= n; i++) { split(p[i], kv, "="); v[kv[1]] = kv[2] }
  printf "%-8s %-26s %7s", $1, $2, cell($3)
  for (i = 1; i <= nc; i++) printf " %*s", length(name[i]) < 7 ? 7 : length(name[i]), cell(v[name[i]])
  printf "  %-16.16s %-16.16s %-10.10s %s\n", short($6), short($7), short($8), $9 }
' "$rows" "$rows" | tee "$OUT/table.txt"
# Below the table: per kernel, the features it lacks, why it failed, and the
# end of the verifier's log where a program was refused.
awk -F'\t' -v out="$OUT" '
	$5 != "" { printf "  %s: features not available: %s\n", $1, $5 }
	$10 != "" { printf "  %s: %s\n", $1, $10 }
	{ f = out "/" $1 ".log"
	  while ((getline l < f) > 0) if (sub(/^GSM verifier /, "", l)) print "      verifier: " l
	  close(f) }' "$rows" | tee -a "$OUT/table.txt"
echo "logs: $OUT/KERNEL.log (GSM lines), KERNEL.console (all output)"
! grep -q $'\tFAIL\t' "$rows" && ! grep -q $'\tFAIL$' "$rows"
