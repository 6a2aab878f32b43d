# Helpers for tests/integration/t_gpu_*.sh (sourced after lib.sh): run the
# PyTorch-shaped app on the CUDA/CUPTI doubles with the agent injected, and
# attach to it with gs_gpu_driver (gpusample's BPF object + gpu/gpu_host.c).
FAKES=$ROOT/$BUILD/fakes
AGENT=$ROOT/$BUILD/libgpusample_agent.so
APP_PY=$ROOT/tests/fakes/gpu_app.py
CUBINS=$ROOT/tests/fakes/cubins
for f in "$AGENT" "$FAKES/libcuda.so.1" "$FAKES/libcupti.so.13" "$FAKES/gs_gpu_driver"; do
	[ -e "$f" ] || fail "$f missing: run make BUILD=$BUILD test-helpers"
done

# Agent + doubles for every process started from here.
export CUDA_INJECTION64_PATH=$AGENT GS_CUPTI_PATH=$FAKES/libcupti.so.13
export FAKE_CUPTI_STATS=$T/cupti.stats

# start_app SECONDS [gpu_app args...]: sets APP (pid); returns once the app
# has loaded its kernels (the agent is injected by then).  The app launches
# for at most SECONDS, or until stop_app (so a slow BPF load on a busy CI
# machine cannot make the app finish before the driver attaches).
start_app() {
	local secs=$1; shift
	rm -f "$T/app.started" "$T/app.stop"
	python3 "$APP_PY" "$FAKES/libcuda.so.1" "$CUBINS" --seconds "$secs" \
		--start-file "$T/app.started" --stop-file "$T/app.stop" "$@" < /dev/null > "$T/app.out" 2>&1 &
	APP=$!
	for _ in $(seq 100); do [ -e "$T/app.started" ] && return 0; sleep 0.05; done
	cat "$T/app.out"; fail "gpu_app did not start"
}

# wait_app: stop the app; it must exit 0 (the job is never hurt).
wait_app() {
	touch "$T/app.stop"
	wait "$APP"; local rc=$?
	[ $rc -eq 0 ] || { cat "$T/app.out"; fail "gpu_app exited $rc"; }
}

# driver ARGS...: attach to $APP; output in $T/driver.out
driver() {
	timeout 60 "$FAKES/gs_gpu_driver" -p "$APP" "$@" > "$T/driver.out" 2> "$T/driver.err" ||
		{ cat "$T/driver.out" "$T/driver.err"; fail "gs_gpu_driver failed"; }
}

# val KEY [FILE]: value of a "KEY value" line (driver output by default)
val() { awk -v k="$1" '$1 == k { print $2; exit }' "${2:-$T/driver.out}"; }
stat() { val "$1" "$T/cupti.stats"; }
show() { echo "--- driver"; cat "$T/driver.out"; echo "--- cupti double"; grep -v '^call\.' "$T/cupti.stats" 2>/dev/null; }

# attached_run RATE [driver args...]: the app launching RATE kernels/s, the
# driver attached once (-n 1 plus the args), the app stopped, both shown.
attached_run() {
	local rate=$1; shift
	start_app 60 --rate "$rate"
	driver -n 1 "$@"
	wait_app
	show
}
