#!/bin/bash
# gs-test-timeout: 30
# The scripts that fetch Debian packages take the mirror from the machine's
# apt configuration (scripts/debian-mirror.sh) and name no archive host of
# their own; with none configured they stop with an error that says what to do.
source "$(dirname "$0")/lib.sh"
source "$ROOT/scripts/debian-mirror.sh"
hits=$(grep -rnE 'deb\.debian\.org|ftp\.[a-z.]*debian\.org|archive\.ubuntu\.com|security\.debian\.org' \
	"$ROOT/scripts" "$ROOT/Makefile" "$ROOT/.ci" | grep -v '^[^:]*:[0-9]*:[[:space:]]*#' || true)
[ -z "$hits" ] || fail "an archive host is hard-coded: $hits"
ok "no archive host in scripts/, Makefile, .ci/"

E=$T/apt
mkdir -p "$E/sources.list.d"
got() { GS_APT_ETC=$E "$@" 2>"$T/err"; }
# none configured: an error naming the files and GS_DEBIAN_MIRROR
got debian_mirror > "$T/out" && fail "no sources, yet a mirror: $(cat "$T/out")"
grep -q 'no Debian mirror.*sources.list.*GS_DEBIAN_MIRROR' "$T/err" || fail "error said: $(cat "$T/err")"
ok "no sources: $(cat "$T/err")"
# a deb-src line, a comment, a disabled deb822 stanza and a deb-src stanza do not count
cat > "$E/sources.list" <<'S'
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
S
cat > "$E/sources.list.d/a.sources" <<'S'
Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://src2.example/debian
Suites: bookworm
Components: main
S
got debian_mirror > "$T/out" && fail "only disabled/source entries, yet a mirror: $(cat "$T/out")"
# deb822, several URIs and a non-Debian repository before it
cat > "$E/sources.list.d/b.sources" <<'S'
types: deb
uris: https://nodes.example/node_20.x
suites: nodistro
components: main

Types: deb deb-src
URIs: http://mirror.example/debian/ http://other.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
S
[ "$(got debian_mirror)" = http://mirror.example/debian ] || fail "deb822: '$(got debian_mirror)' $(cat "$T/err")"
[ "$(got debian_security)" = http://mirror.example/debian-security ] || fail "deb822 security: '$(got debian_security)'"
ok "deb822 sources"
# one-line sources with options come first (sources.list before sources.list.d)
echo 'deb [arch=amd64 signed-by=/k.gpg] http://local.example/debian/ bookworm main' >> "$E/sources.list"
[ "$(got debian_mirror)" = http://local.example/debian ] || fail "one-line: '$(got debian_mirror)'"
rm "$E/sources.list.d/b.sources"
[ "$(got debian_security)" = http://local.example/debian-security ] || fail "security sibling: '$(got debian_security)'"
ok "one-line sources"
[ "$(GS_DEBIAN_MIRROR=http://x.example/debian/ got debian_mirror)" = http://x.example/debian ] || fail "GS_DEBIAN_MIRROR ignored"
# the scripts themselves stop on it: sid-root.sh with no mirror says so
rm -f "$E/sources.list" "$E"/sources.list.d/*
command -v debootstrap >/dev/null || fail "debootstrap missing (sudo make test-deps)"
GS_APT_ETC=$E GS_SID_ROOT=$T/sid "$ROOT/scripts/sid-root.sh" 2>"$T/err" && fail "sid-root.sh ran with no mirror"
grep -q 'sid-root.sh: no Debian mirror' "$T/err" || fail "sid-root.sh said: $(cat "$T/err")"
[ ! -e "$T/sid" ] || fail "sid-root.sh started a root with no mirror"
GS_APT_ETC=$E "$ROOT/scripts/fetch-libcuda.sh" "$T/drv" 2>"$T/err" && fail "fetch-libcuda.sh ran with no mirror"
grep -q 'fetch-libcuda.sh: no Debian mirror' "$T/err" || fail "fetch-libcuda.sh said: $(cat "$T/err")"
ok "scripts stop with no mirror: $(cat "$T/err")"
