#!/bin/bash
# Sourced, not run: the Debian mirror this machine's apt already uses, for the
# scripts that fetch Debian packages (sid-root.sh, kernel-matrix.sh,
# fetch-libcuda.sh).  No archive host is built in: a machine behind a proxy
# or a local mirror is served by what its own apt is configured with.
#
# debian_mirror:   prints the mirror URI (no trailing /), e.g.
#                  http://deb.debian.org/debian; returns 1 with a message on
#                  stderr that says what to do when there is none.
# debian_security: prints the security archive URI: GS_DEBIAN_SECURITY, else
#                  apt's URI ending in /debian-security, else the mirror's
#                  sibling .../debian-security.
# Sources read: GS_APT_ETC (default /etc/apt) sources.list,
# sources.list.d/*.list (one-line "deb [opts] URI suite comp...") and
# sources.list.d/*.sources (deb822 stanzas with Types: deb; Enabled: no skipped).
# GS_DEBIAN_MIRROR / GS_DEBIAN_SECURITY override what apt says.

# apt_deb_uris: every URI of a binary ("deb") source, one a line, in apt's
# reading order (sources.list, then sources.list.d/ by name).
apt_deb_uris() {
	local etc=${GS_APT_ETC:-/etc/apt} f
	for f in "$etc/sources.list" "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		case $f in
		*.sources)
			# deb822: one stanza per paragraph; field names are case-insensitive.
			awk 'BEGIN { RS = ""; FS = "\n" }
			     { deb = 0; on = 1; n = 0
			       for (i = 1; i <= NF; i++) {
			         l = $i; if (l ~ /^[[:space:]]*#/) continue
			         k = tolower(l); sub(/:.*/, "", k); v = l; sub(/^[^:]*:[[:space:]]*/, "", v)
			         if (k == "types") { if ((" " v " ") ~ /[[:space:]]deb[[:space:]]/) deb = 1 }
			         else if (k == "enabled") { if (tolower(v) ~ /^no/) on = 0 }
			         else if (k == "uris") { n = split(v, u, /[[:space:]]+/) }
			       }
			       if (deb && on) for (j = 1; j <= n; j++) if (u[j] != "") print u[j] }' "$f"
			;;
		*)
			awk '$1 == "deb" { i = 2
			                   if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
			                   if (i <= NF) print $i }' "$f"
			;;
		esac
	done
}

debian_mirror() {
	local m=${GS_DEBIAN_MIRROR:-$(apt_deb_uris | grep -E '/debian/?$' | head -1)}
	if [ -z "$m" ]; then
		echo "${0##*/}: no Debian mirror (a deb source whose URI ends in /debian) in" \
			"${GS_APT_ETC:-/etc/apt}/sources.list or sources.list.d/*.list, *.sources:" \
			"add one to apt's configuration, or set GS_DEBIAN_MIRROR=URI (e.g. http://MIRROR/debian)" >&2
		return 1
	fi
	echo "${m%/}"
}

debian_security() {
	local s=${GS_DEBIAN_SECURITY:-$(apt_deb_uris | grep -E '/debian-security/?$' | head -1)} m
	if [ -z "$s" ]; then
		m=$(debian_mirror) || return 1
		s=${m%/debian}/debian-security
	fi
	echo "${s%/}"
}
