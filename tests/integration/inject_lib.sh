# Helpers for t_gpu_inject*.sh (sourced after lib.sh, python_lib.sh and
# tests/fakes/gpu_test_lib.sh): jobs with nothing of gpusample in their
# environment (no CUDA_INJECTION64_PATH, no GS_*), the CUDA/CUPTI doubles
# found by the loader's path as a cluster's CUDA libraries are, and
# gpusample -p PID --inject on them.
unset CUDA_INJECTION64_PATH GS_CUPTI_PATH GS_AGENT_OPTS
sid_need

# staged: the staging directories in the host's /tmp (the sid jobs bind it)
staged() { ls -d /tmp/.gpusample-inject-* 2>/dev/null; }
[ -z "$(staged)" ] || fail "staged directories left by an earlier run: $(staged)"

# start_plain PYTHON [PYTHON ARGS]: gpu_app (more arguments in APP_ARGS) with
# the doubles on the loader's path and nothing of gpusample; sets APP.
start_plain() {
	local py=$1; shift
	rm -f "$T/app.started" "$T/app.stop" "$T/cupti.stats"
	# shellcheck disable=SC2046,SC2086 # one -u per GS_ variable; APP_ARGS split
	env $(compgen -e | grep '^GS_' | sed 's/^/-u /') LD_LIBRARY_PATH="$FAKES" \
		"$py" "$@" "$APP_PY" "$FAKES/libcuda.so.1" "$CUBINS" --seconds 60 \
		--rate 600 --primary --start-file "$T/app.started" --stop-file "$T/app.stop" ${APP_ARGS:-} \
		< /dev/null > "$T/app.out" 2>&1 &
	APP=$!
	for _ in $(seq 200); do [ -e "$T/app.started" ] && break; sleep 0.05; done
	[ -e "$T/app.started" ] || { cat "$T/app.out"; fail "gpu_app ($py) did not start"; }
	! tr '\0' '\n' < "/proc/$APP/environ" | grep -q '^CUDA_INJECTION64_PATH=\|^GS_' ||
		fail "the job has a gpusample variable"
}

# inject NAME ARGS...: gpusample -p $APP --inject ARGS; profile $T/NAME.pb.gz,
# stderr and report $T/NAME.out
inject() {
	local name=$1; shift
	"$GS" -p "$APP" --inject "$@" -o "$T/$name" --format pprof > "$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "gpusample -p --inject ($name) failed"; }
	"$GS" report "$T/$name.pb.gz" > "$T/$name.report" 2>&1 || fail "gpusample report $name failed"
	# the CPU side goes on: the main thread's wall time (on- and off-CPU)
	awk '/s of wall time/ { for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $i + 0 > 0) ok = 1 }
		END { exit !ok }' "$T/$name.report" || { cat "$T/$name.report"; fail "$name: no wall time in the profile"; }
}

gpu_kernels() {
	pprof -sample_index=gpu_samples -top "$1" > "$1.gputop" || fail "pprof failed: $(cat "$T/pprof.err")"
	for k in axpy reduce_sum; do
		grep -q "$k" "$1.gputop" || { cat "$1.gputop"; fail "$1: no GPU samples of $k"; }
	done
}

