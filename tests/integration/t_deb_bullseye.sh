#!/bin/bash
# gs-test-timeout: 240
# The package on an old baseline: a Debian 11 root (glibc 2.31, Python 3.9;
# scripts/bullseye-root.sh, made by make test-deps) installs make deb's
# package with dpkg -i inside it, and there (chroot, the host's pid
# namespace, /proc /sys /dev as a privileged container has them):
#  - gpusample --version and gpusample check run;
#  - gpusample profiles a Python 3.9 job of that root (Python frames of the
#    script);
#  - a python3 job launched there loads the agent gpusample hands it
#    (CUDA_INJECTION64_PATH, dlopen through ctypes): no glibc symbol the
#    root lacks.
# The cached root is never written: an overlay with its upper layer in $T.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
B=${GS_BULLSEYE_ROOT:-/var/cache/gpusample/bullseye-root}
"$ROOT/scripts/bullseye-root.sh" "$B" > "$T/root.log" 2>&1 ||
	fail "the Debian 11 root $B is missing and scripts/bullseye-root.sh failed: $(tail -5 "$T/root.log")"
deb=$(make -s BUILD="$BUILD" deb 2>"$T/make.err" | tail -1) || fail "make deb: $(tail -5 "$T/make.err")"
[ -s "$deb" ] || fail "make deb wrote no package ('$deb')"
cp "$deb" "$T/gpusample.deb"
mkdir -p "$T/wl" && cp "$PYWL/py_chain.py" "$PYWL/py_common.py" "$T/wl/"

# in_root CMD...: CMD in the overlay of the Debian 11 root, $T as /tmp/t
cat > "$T/in_root" <<'EOS'
#!/bin/sh
b=$1 t=$2
shift 2
exec unshare -m --propagation private sh -c '
b=$1 t=$2
shift 2
c=$t/merged
mkdir -p "$t/upper" "$t/work" "$c" || exit 1
mount -t overlay overlay -o "lowerdir=$b,upperdir=$t/upper,workdir=$t/work" "$c" || exit 1
mount -t proc proc "$c/proc" && mount -t sysfs sysfs "$c/sys" && mount --rbind /dev "$c/dev" || exit 1
mkdir -p "$c/tmp/t" && mount --bind "$t" "$c/tmp/t" || exit 1
exec chroot "$c" "$@"' sh "$b" "$t" "$@"
EOS
chmod +x "$T/in_root"
inr() { "$T/in_root" "$B" "$T" "$@"; }

inr sh -c 'ldd --version | head -1; python3 --version' > "$T/ver" 2>&1 || fail "the root does not run: $(cat "$T/ver")"
grep -q 'GLIBC 2.31' "$T/ver" && grep -q '^Python 3\.9\.' "$T/ver" || fail "not glibc 2.31 / Python 3.9: $(cat "$T/ver")"
ok "root: $(tr '\n' ' ' < "$T/ver")"

inr dpkg -i /tmp/t/gpusample.deb > "$T/dpkg" 2>&1 || fail "dpkg -i in the Debian 11 root: $(cat "$T/dpkg")"
inr dpkg -s gpusample | grep -qx 'Status: install ok installed' || fail "not installed: $(cat "$T/dpkg")"
ok "dpkg -i: installed"

v=$(inr gpusample --version 2>&1) && [ "$v" = "$("$GS" --version)" ] || fail "gpusample --version there: $v"
inr gpusample check > "$T/check" 2>&1 || fail "gpusample check there: $(cat "$T/check")"
ok "$v; check: $(grep '^ok: ' "$T/check")"

# a Python 3.9 job of the root, launched there
inr env GS_SECONDS=2 gpusample -q -d 30 -o /tmp/t/b --format pprof -- python3 /tmp/t/wl/py_chain.py \
	> "$T/b.stdout" 2> "$T/b.err" || fail "gpusample -- python3 there: $(cat "$T/b.err")"
py_read "$T/b"
L_LOOP=$(marker_line "$PYWL/py_chain.py" LOOP_LINE)
n=$(grep -c "inner@py_chain.py:$L_LOOP" "$T/b")
[ "$n" -ge 20 ] || { py_report "$T/b.pb.gz"; fail "only $n samples in the Python 3.9 job's loop"; }
grep -q "CPython 3\.9\." <(py_report "$T/b.pb.gz") || fail "the job is not CPython 3.9: $(py_report "$T/b.pb.gz")"
ok "profiled a Python 3.9 job there: $n samples in inner@py_chain.py:$L_LOOP"

# its python3 loads the agent gpusample gives it
inr gpusample -q -d 30 -o /tmp/t/a --format pprof -- python3 -c '
import ctypes, os
p = os.environ["CUDA_INJECTION64_PATH"]
ctypes.CDLL(p)
print("loaded", os.path.realpath(p))' > "$T/a.stdout" 2> "$T/a.err" ||
	fail "the agent in a python3 job there: $(cat "$T/a.stdout" "$T/a.err")"
grep -qx "loaded /usr/lib/gpusample/libgpusample_agent.so" "$T/a.stdout" ||
	fail "python3 did not load the installed agent: $(cat "$T/a.stdout" "$T/a.err")"
ok "python3 $(cat "$T/a.stdout")"
