# Helpers for the t_python_*.sh tests (sourced after lib.sh).
# PY_DRIVER samples a process tree with the Python walker through the
# sampler API (tests/integration/t_python_driver.c) and prints one line per
# sample: "TGID TID COMM FLAGS N|root;...;leaf", frames as qualname@file:line.
PY_DRIVER=$ROOT/$BUILD/tests/t_python_driver
PYWL=$ROOT/tests/workloads

build_py_driver() {
	[ -f "$ROOT/$BUILD/libgpusample_core.a" ] || fail "$BUILD/libgpusample_core.a missing (run make)"
	[ "$PY_DRIVER" -nt "$ROOT/tests/integration/t_python_driver.c" ] &&
		[ "$PY_DRIVER" -nt "$ROOT/$BUILD/libgpusample_core.a" ] && return 0
	mkdir -p "$(dirname "$PY_DRIVER")"
	cc -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Werror -D_GNU_SOURCE \
		-I"$ROOT/include" -I"$ROOT" -I"$ROOT/$BUILD" -o "$PY_DRIVER" \
		"$ROOT/tests/integration/t_python_driver.c" "$ROOT/$BUILD/libgpusample_core.a" \
		-Wl,-Bstatic -lbpf -ldw -lelf -lz -llzma -lbz2 -lzstd -liberty -Wl,-Bdynamic \
		-lpthread -ldl -lm || fail "cannot build the Python walker test driver"
}

# Interpreters to test: every pyenv CPython 3.8-3.13 plus Debian's python3.
py_versions() {
	local v
	for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
		ls -d /root/.pyenv/versions/$v.*/bin/python 2>/dev/null | head -1
	done
	[ -x /usr/bin/python3 ] && echo /usr/bin/python3
}

# py_profile OUT PYTHON SCRIPT SECS [args]: run SCRIPT under PYTHON, attach
# the driver, release the script (GS_GO), wait for both.  Driver stderr in
# OUT.err.
py_profile() {
	local out=$1 py=$2 script=$3 secs=$4
	shift 4
	local go=$T/go.$$.$RANDOM ready=$T/ready.$$.$RANDOM
	GS_GO=$go GS_SECONDS=$secs "$py" "$PYWL/$script" "$@" &
	local pid=$!
	sleep 0.3
	"$PY_DRIVER" -p "$pid" -d $((secs + 20)) -r "$ready" >"$out" 2>"$out.err" &
	local drv=$!
	for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.1; done
	[ -e "$ready" ] || { kill $pid $drv 2>/dev/null; cat "$out.err"; fail "driver did not start"; }
	touch "$go"
	wait $pid
	wait $drv || { cat "$out.err"; fail "driver failed"; }
}

# Line number of the line of FILE containing MARKER.
marker_line() { grep -n "$2" "$1" | head -1 | cut -d: -f1; }
