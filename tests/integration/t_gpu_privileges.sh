#!/bin/bash
# sudo gpusample -- CMD runs CMD as the invoking user (issue 15 item 9): when
# the NVIDIA driver restricts profiling to admins (RmProfilingAdminOnly: 1 in
# /proc/driver/nvidia/params; GS_NVIDIA_PARAMS points at a copy here, there
# is no driver), gpusample says before the run what to do (--as-root or the
# module option) and notes it in the profile; not with --as-root, not when
# the driver allows everyone, not without sudo.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, creating a user)"
U=gs-untrusted
id "$U" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$U" ||
	fail "cannot create user $U"
uid=$(id -u "$U") gid=$(id -g "$U")
printf 'ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nNvSwitchRegDwords: ""\n' > "$T/admin"
printf 'RmProfilingAdminOnly: 0\n' > "$T/open"
cd "$T" || fail "no $T"
run() { # NAME PARAMS [gpusample options]: sudo-style launch of a short command
	local name=$1 params=$2; shift 2
	GS_NVIDIA_PARAMS=$params SUDO_UID=$uid SUDO_GID=$gid SUDO_USER=$U "$GS" -q -o "$T/$name" \
		--format pprof "$@" -- /bin/sleep 0.3 > "$T/$name.out" 2>&1 || { cat "$T/$name.out"; fail "$name: gpusample failed"; }
}
run admin "$T/admin"
grep -q 'RmProfilingAdminOnly=1' "$T/admin.out" || { cat "$T/admin.out"; fail "no warning with RmProfilingAdminOnly: 1 under sudo"; }
grep -q -- '--as-root' "$T/admin.out" || fail "the warning does not say --as-root"
grep -q 'NVreg_RestrictProfilingToAdminUsers=0' "$T/admin.out" || fail "the warning does not name the module option"
w=$(grep -n 'RmProfilingAdminOnly' "$T/admin.out" | head -1 | cut -d: -f1)
s=$(grep -n '^gpusample: sampling' "$T/admin.out" | head -1 | cut -d: -f1)
[ -n "$s" ] && [ "$w" -lt "$s" ] || { cat "$T/admin.out"; fail "the warning comes after sampling started"; }
"$GS" report "$T/admin.pb.gz" | grep -q 'RmProfilingAdminOnly=1' || fail "the warning is not in the profile's report"
run asroot "$T/admin" --as-root
grep -q 'RmProfilingAdminOnly' "$T/asroot.out" && fail "warned although --as-root runs CMD as root"
run open "$T/open"
grep -q 'RmProfilingAdminOnly' "$T/open.out" && fail "warned although the driver lets everyone profile"
# The variable is the caller's under sudo -E: a FIFO there must not hang
# root, and a file the caller owns is not believed.
mkfifo "$T/fifo"
cp "$T/admin" "$T/theirs" && chown "$uid" "$T/theirs"
for p in fifo theirs; do
	GS_NVIDIA_PARAMS=$T/$p SUDO_UID=$uid SUDO_GID=$gid SUDO_USER=$U timeout 30 "$GS" -q -o "$T/$p" \
		--format pprof -- /bin/sleep 0.3 > "$T/$p.out" 2>&1 || { cat "$T/$p.out"; fail "$p at GS_NVIDIA_PARAMS: gpusample failed or hung"; }
	grep -q 'RmProfilingAdminOnly' "$T/$p.out" && fail "believed a $p at GS_NVIDIA_PARAMS"
done
GS_NVIDIA_PARAMS=$T/admin "$GS" -q -o "$T/nosudo" --format pprof -- /bin/sleep 0.3 > "$T/nosudo.out" 2>&1 ||
	fail "gpusample without sudo failed"
grep -q 'RmProfilingAdminOnly' "$T/nosudo.out" && fail "warned although CMD runs as root (no sudo)"
ok "RmProfilingAdminOnly=1 under sudo: told before the run (--as-root, module option) and in the profile; quiet otherwise; a FIFO or caller-owned file at GS_NVIDIA_PARAMS ignored"
