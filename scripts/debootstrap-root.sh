#!/bin/bash
# Sourced, not run: the steps sid-root.sh and bullseye-root.sh share to make
# a Debian root with debootstrap from the host's own mirror.
#
# root_debootstrap NAME ROOT SUITE PACKAGES: as root, remove a half-built
# ROOT (an interrupted run), debootstrap SUITE (minbase, PACKAGES: blank
# separated) into ROOT.tmp.PID from the mirror of debian-mirror.sh.  Sets
# tmp (that folder, removed on exit unless moved) and mirror; returns 1 with
# a message prefixed NAME on stderr on failure.
# shellcheck source=scripts/debian-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/debian-mirror.sh"

root_debootstrap() {
	local name=$1 root=$2 suite=$3 pkgs=$4 m
	if [ "$(id -u)" -ne 0 ]; then
		echo "$name: run as root" >&2
		return 1
	fi
	command -v debootstrap >/dev/null || {
		echo "$name: debootstrap missing (sudo make test-deps installs it)" >&2
		return 1
	}
	mirror=$(debian_mirror) || return 1
	if [ -d "$root" ]; then
		for m in proc sys dev; do
			mountpoint -q "$root/$m" && umount -l "$root/$m"
		done
		rm -rf --one-file-system "$root"
	fi
	mkdir -p "$(dirname "$root")"
	tmp="$root.tmp.$$"
	# shellcheck disable=SC2064 # tmp is fixed now
	trap "rm -rf --one-file-system '$tmp' '$tmp.src'" EXIT
	echo "$name: debootstrap $suite from $mirror into $root" >&2
	# shellcheck disable=SC2086 # a list of package names
	debootstrap --variant=minbase --include="$(echo $pkgs | tr ' ' ,)" "$suite" "$tmp" "$mirror" \
		>"$tmp.log" 2>&1 || {
		tail -20 "$tmp.log" >&2
		echo "$name: debootstrap failed (log: $tmp.log)" >&2
		return 1
	}
	rm -f "$tmp.log"
}
