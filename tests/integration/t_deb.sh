#!/bin/bash
# gs-test-timeout: 180
# make deb: a Debian package built with dpkg-deb that lintian passes (its
# overrides say why), declares only libc (>= 2.31 at most: the compat
# build, scripts/glibc-floor.sh checks the binaries), installs with dpkg into a scratch
# root, and whose gpusample runs there, finds its agent in the package's
# layout, and has a man page and bash completion.
source "$(dirname "$0")/lib.sh"
for c in dpkg-deb dpkg-shlibdeps lintian man; do
	command -v "$c" >/dev/null || fail "$c missing (sudo make test-deps)"
done
deb=$(make -s BUILD="$BUILD" deb 2>"$T/make.err" | tail -1) || fail "make deb: $(tail -5 "$T/make.err")"
ver=$("$GS" --version | awk '{print $NF}')
[ "$deb" = "$BUILD/gpusample_${ver}_$(dpkg --print-architecture).deb" ] && [ -s "$deb" ] ||
	fail "make deb wrote '$deb' (version $ver)"
ok "built $deb"

dpkg-deb -I "$deb" > "$T/info" || fail "dpkg-deb -I: $(cat "$T/info")"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = gpusample ] && [ "$(field Version)" = "$ver" ] || fail "control: $(cat "$T/info")"
[[ $(field Depends) =~ ^libc6\ \(\>=\ 2\.([0-9]+)\)$ ]] || fail "Depends is not libc only: '$(field Depends)'"
# the compat build: Debian 11's glibc 2.31 is enough
[ "${BASH_REMATCH[1]}" -le 31 ] || fail "Depends asks for a glibc newer than 2.31: '$(field Depends)'"
ok "dpkg-deb -I: $(field Package) $(field Version) $(field Architecture), Depends: $(field Depends)"
dpkg-deb -c "$deb" | awk '{print $1, $2, $NF}' > "$T/list"
for f in "-rwxr-xr-x ./usr/bin/gpusample" "-rw-r--r-- ./usr/lib/gpusample/libgpusample_agent.so" \
	"-rw-r--r-- ./usr/share/man/man1/gpusample.1.gz" \
	"-rw-r--r-- ./usr/share/bash-completion/completions/gpusample" \
	"-rw-r--r-- ./usr/share/doc/gpusample/copyright"; do
	grep -qxF -- "${f% *} root/root ${f#* }" "$T/list" || fail "not in the package as '$f': $(cat "$T/list")"
done
ok "contents"

lintian --fail-on error,warning "$deb" > "$T/lintian" 2>&1 || fail "lintian: $(cat "$T/lintian")"
grep -E '^[EW]:' "$T/lintian" && fail "lintian: $(cat "$T/lintian")"
ok "lintian: no error or warning"

# install with dpkg into a scratch root (its own database; libc is the host's)
R=$T/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates"
: > "$R/var/lib/dpkg/status"
dpkg --root="$R" --log=/dev/null --force-depends --force-script-chrootless -i "$deb" > "$T/dpkg" 2>&1 ||
	fail "dpkg -i: $(cat "$T/dpkg")"
dpkg --root="$R" -s gpusample | grep -qx 'Status: install ok installed' || fail "not installed"
[ "$("$R/usr/bin/gpusample" --version)" = "$("$GS" --version)" ] || fail "installed --version: $("$R/usr/bin/gpusample" --version)"
ok "installed: $("$R/usr/bin/gpusample" --version)"
"$ROOT/scripts/glibc-floor.sh" 2.31 "$R/usr/bin/gpusample" "$R/usr/lib/gpusample/libgpusample_agent.so" \
	> "$T/floor" 2>&1 || fail "glibc: $(cat "$T/floor")"
ok "$(cat "$T/floor")"
# launch mode finds the agent where the package put it
"$R/usr/bin/gpusample" -q -d 5 --format pprof -o "$T/inst" -- sh -c \
	'echo "$CUDA_INJECTION64_PATH" > "$0"; i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done' \
	"$T/inj" 2>"$T/inst.err" || fail "installed gpusample: $(cat "$T/inst.err")"
[ "$(readlink -f "$(cat "$T/inj")")" = "$R/usr/lib/gpusample/libgpusample_agent.so" ] ||
	fail "the agent given to the job: '$(cat "$T/inj")'"
ok "the job got the installed agent"

# the man page renders without groff warnings and documents the options
MANWIDTH=80 man --warnings -l "$R/usr/share/man/man1/gpusample.1.gz" > "$T/man" 2>"$T/man.err" ||
	fail "man: $(cat "$T/man.err")"
[ ! -s "$T/man.err" ] || fail "man warnings: $(cat "$T/man.err")"
for o in $("$GS" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
	grep -qF -- "$o" "$T/man" || fail "the man page lacks $o"
done
ok "man page: $(wc -l < "$T/man") lines, every --help option"
bash -n "$R/usr/share/bash-completion/completions/gpusample" || fail "completion: syntax"
for o in $("$GS" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
	grep -qF -- "$o" "$R/usr/share/bash-completion/completions/gpusample" || fail "completion lacks $o"
done
# and completes as bash-completion runs it
BC=/usr/share/bash-completion/bash_completion
[ -r "$BC" ] || fail "$BC missing (bash-completion; sudo make test-deps)"
comp() { # comp WORD...: what completing the last word offers
	BC=$BC CF=$R/usr/share/bash-completion/completions/gpusample bash -c 'source "$BC"; source "$CF"
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_gpusample gpusample "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; echo "${COMPREPLY[*]}"' \
		_ "$@" 2>/dev/null
}
[ "$(comp gpusample re)" = report ] || fail "completion 're': '$(comp gpusample re)'"
[ "$(comp gpusample --on-duration=k)" = keep ] || fail "completion '--on-duration=k': '$(comp gpusample --on-duration=k)'"
[ "$(comp gpusample --format pprof,sp)" = pprof,speedscope ] || fail "completion of a format list: '$(comp gpusample --format pprof,sp)'"
[ "$(comp gpusample report --h)" = --html ] || fail "completion 'report --h': '$(comp gpusample report --h)'"
ok "bash completion names every --help option and completes them"
