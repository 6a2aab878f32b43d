# Shared by t_gpu_join_*.sh (sourced after lib.sh): run the CUDA/CUPTI
# doubles' PyTorch-shaped app (tests/fakes/gpu_app.py: train_step ->
# forward -> axpy, scale<float>; backward -> reduce_sum) under gpusample
# with the real agent, then read the profile with go tool pprof.
[ "$(id -u)" -eq 0 ] || fail "needs root (BPF, USDT): run the tests as root"
AGENT=$ROOT/$BUILD/libgpusample_agent.so
FAKES=$ROOT/$BUILD/fakes
for f in "$GS" "$AGENT" "$FAKES/libcuda.so.1" "$FAKES/libcupti.so.13"; do
	[ -e "$f" ] || fail "$f missing: run make"
done
[ -s "$AGENT" ] || fail "$AGENT is empty (gpu_sampler/ not built)"
CUPTI_REAL=$(ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.* /usr/local/cuda/lib64/libcupti.so.* \
	/usr/local/cuda/lib/libcupti.so.* 2>/dev/null | head -1)

# gpu_run NAME [gpusample options...]: profile the app for ~3 s into
# $T/NAME.pb.gz (+ NAME.cpu.folded, NAME.gpu.folded); the double's counts in
# $T/NAME.cupti; gpusample's stdout (the report, without -q) in $T/NAME.out.
# GPU_APP_ARGS: extra gpu_app.py arguments (e.g. --devices 2).
gpu_run() {
	local name=$1; shift
	# shellcheck disable=SC2086
	"$GS" -o "$T/$name" --format pprof,folded "$@" -- env \
		LD_LIBRARY_PATH="$FAKES" CUDA_INJECTION64_PATH="$AGENT" GS_CUPTI_PATH="$FAKES/libcupti.so.13" \
		FAKE_CUPTI_REAL="$CUPTI_REAL" \
		FAKE_CUPTI_STATS="$T/$name.cupti" \
		/usr/bin/python3 tests/fakes/gpu_app.py "$FAKES/libcuda.so.1" tests/fakes/cubins \
		--seconds 3 --rate 600 ${GPU_APP_ARGS:-} > "$T/$name.out" 2> "$T/$name.err" ||
		fail "gpusample exited with $?: $(tail -5 "$T/$name.err")"
	grep -q 'gpu_app launches=' "$T/$name.out" || fail "gpu_app did not finish: $(tail -5 "$T/$name.err")"
	[ -s "$T/$name.pb.gz" ] || fail "no $T/$name.pb.gz written"
	# GS_CUPTI_PATH names the double: without it the agent would take the
	# toolkit's real libcupti, which cannot talk to the driver double.
	[ -s "$T/$name.cupti" ] || fail "the agent did not use the CUPTI double: $(grep -i 'gpu' "$T/$name.err" | tail -3)"
}

# cupti_stat NAME KEY: a counter from the CUPTI double's stats of run NAME
cupti_stat() { awk -v k="$2" '$1 == k { print $2; exit }' "$T/$1.cupti"; }

# Total of a pprof -top (the "of N total" figure).
top_total() { sed -n 's/.* of \([0-9.]*\) total.*/\1/p' | head -1; }

# Number after "Showing nodes accounting for" (what the filters kept).
accounted() { sed -n 's/.*accounting for \([0-9.]*\).*/\1/p' | head -1; }

# Line of gpu_app.py holding the marker comment $1 ("call site 1 of scale").
app_line() { grep -n "$1" tests/fakes/gpu_app.py | head -1 | cut -d: -f1; }

# Lines [first, last] of axpy's body in tests/fakes/kernels.cu.
axpy_lines() {
	awk '/void axpy\(/ {s=NR} s && /^}/ {print s, NR; exit}' tests/fakes/kernels.cu
}

# GPU samples whose stack has frame $2 (regex on one frame) among those of
# kernel leaf $1, from pprof_stacks.py output in $3: prints "with total".
under() {
	awk -F'\t' -v k="$1" -v fr="$2" '{
		n = split($3, f, ";"); if (f[1] !~ k) next; tot += $1
		for (i = 2; i <= n; i++) if (f[i] ~ fr) { with += $1; break }
	} END { print with + 0, tot + 0 }' "$3"
}
