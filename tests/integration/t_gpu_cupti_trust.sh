#!/bin/bash
# Root never runs the job's code (issue 12): a job owned by an unprivileged
# user plants a "libcupti" with a constructor in its own mappings and in
# CUDA_HOME (and points GS_CUPTI_LIB, CUDA_PATH, VIRTUAL_ENV, CONDA_PREFIX
# at it); gpusample, as root, symbolizes the job's cubins with -p PID and
# with a sudo-style launch, and the constructor's marker must never appear.
# A positive control loads the planted library as root first, so a marker
# that cannot appear would fail the test; GPU samples with source lines show
# that host-side symbolization ran (with the toolkit's libcupti).
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/fakes/gpu_test_lib.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, USDT, creating a user)"
PLANTED=$ROOT/$BUILD/fakes/planted/libcupti.so.13
[ -e "$PLANTED" ] || fail "$PLANTED missing: run make BUILD=$BUILD test-helpers"
compgen -G '/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*' >/dev/null ||
	compgen -G '/usr/local/cuda/lib64/libcupti.so*' >/dev/null ||
	compgen -G '/usr/local/cuda/lib/libcupti.so*' >/dev/null ||
	fail "no libcupti in the CUDA toolkit (/usr/local/cuda): install the toolkit (scripts/install-deps.sh)"

U=gs-untrusted
id "$U" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$U" ||
	fail "cannot create user $U"
uid=$(id -u "$U") gid=$(id -g "$U")
[ "$uid" -ne 0 ] || fail "$U is root"
E=$(mktemp -d /tmp/gs-planted.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$E"; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT
mkdir -p "$E/lib" "$E/cuda/extras/CUPTI/lib64" "$E/cuda/lib64" "$E/venv/lib/python3.11/site-packages/nvidia/cuda_cupti/lib"
for d in lib cuda/extras/CUPTI/lib64 cuda/lib64 venv/lib/python3.11/site-packages/nvidia/cuda_cupti/lib; do
	cp "$PLANTED" "$E/$d/libcupti.so.13"
	ln -s libcupti.so.13 "$E/$d/libcupti.so"
done
chown -R "$U:$U" "$E"
chmod 755 "$E"
markers() { find "$E" -name LOADED_AS_ROOT; }

# Positive control: the planted library does write its marker when root loads it.
/usr/bin/python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$E/cuda/lib64/libcupti.so.13" ||
	fail "control: cannot load the planted library"
[ -n "$(markers)" ] || fail "control: loading the planted library as root wrote no marker"
rm -f "$E"/cuda/lib64/LOADED_AS_ROOT
# ... and not when the job's user loads it.
setpriv --reuid="$uid" --regid="$gid" --clear-groups /usr/bin/python3 -c \
	"import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$E/lib/libcupti.so.13" || fail "control: user load failed"
[ -z "$(markers)" ] || fail "control: the marker appeared for a non-root load"

export GS_CUPTI_LIB=$E/lib/libcupti.so.13 CUDA_HOME=$E/cuda CUDA_PATH=$E/cuda \
	VIRTUAL_ENV=$E/venv CONDA_PREFIX=$E/venv
# The job: maps the planted library first, then runs the app on the doubles.
JOB="import ctypes, runpy, sys; ctypes.CDLL('$E/lib/libcupti.so.13'); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
export FAKE_CUPTI_STATS=$E/cupti.stats

check_profile() { # NAME: GPU samples with source lines, no marker
	local p=$T/$1.pb.gz
	[ -s "$p" ] || fail "$1: no profile written: $(tail -3 "$T/$1.out")"
	[ -z "$(markers)" ] || fail "$1: gpusample loaded the planted libcupti as root: $(markers)"
	pprof -sample_index=gpu_samples -lines -top "$p" > "$T/$1.lines" || fail "$1: pprof: $(cat "$T/pprof.err")"
	grep -q 'axpy' "$T/$1.lines" || { cat "$T/$1.out"; fail "$1: no GPU samples of axpy: cubins never symbolized"; }
	grep -q 'axpy .*kernels\.cu:[0-9]' "$T/$1.lines" ||
		{ head -20 "$T/$1.lines"; fail "$1: no source lines: the toolkit's libcupti was not used"; }
}

# 1. -p PID on the user's job, started with subscribe=init so that the
#    cubins it loads before the attach are kept (source lines need them)
GS_AGENT_OPTS=subscribe=init setpriv --reuid="$uid" --regid="$gid" --clear-groups /usr/bin/python3 -c "$JOB" "$APP_PY" "$FAKES/libcuda.so.1" \
	"$CUBINS" --seconds 30 --rate 600 --start-file "$E/started" --stop-file "$E/stop" > "$T/app.out" 2>&1 &
APP=$!
for _ in $(seq 100); do [ -e "$E/started" ] && break; sleep 0.05; done
[ -e "$E/started" ] || { cat "$T/app.out"; fail "the job did not start"; }
grep -q "$E/lib/libcupti.so.13" "/proc/$APP/maps" || fail "the job does not map the planted libcupti"
"$GS" -p "$APP" -d 3 -q -o "$T/p" --format pprof > "$T/p.out" 2>&1 || { cat "$T/p.out"; fail "gpusample -p failed"; }
touch "$E/stop"
wait "$APP" || { cat "$T/app.out"; fail "the job failed"; }
check_profile p

# 2. sudo-style launch: the command runs as the caller, the environment is the caller's
SUDO_UID=$uid SUDO_GID=$gid SUDO_USER=$U "$GS" -q -o "$T/l" --format pprof -- \
	/usr/bin/python3 -c "$JOB" "$APP_PY" "$FAKES/libcuda.so.1" "$CUBINS" --seconds 3 --rate 600 > "$T/l.out" 2>&1 ||
	{ cat "$T/l.out"; fail "gpusample -- CMD failed"; }
check_profile l

# 3. --cupti naming the planted file is refused before sampling starts
"$GS" --cupti "$E/lib/libcupti.so.13" -q -o "$T/c" -d 1 -- true > "$T/c.out" 2>&1 &&
	fail "--cupti with a user-owned file was accepted"
grep -q 'refused' "$T/c.out" || { cat "$T/c.out"; fail "--cupti: no clear refusal"; }
grep -q '^gpusample: sampling' "$T/c.out" && fail "--cupti refused only after sampling started"
[ -z "$(markers)" ] || fail "--cupti: planted library loaded"
ok "planted libcupti (job's maps, CUDA_HOME, GS_CUPTI_LIB, VIRTUAL_ENV, CONDA_PREFIX) never loaded as root; -p and sudo launch symbolized with the toolkit's; --cupti refused it"
