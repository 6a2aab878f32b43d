# Helpers for the t_offcpu_*.sh tests (sourced after lib.sh and
# python_lib.sh).  The workload is tests/workloads/py_offcpu.py on Debian's
# python3; its ground truth (JSON) goes to OUT.json, the profile to
# OUT.pb.gz, read back with go tool pprof through tests/tools/thread_times.py.
py_need_gs
OFF_PY=/usr/bin/python3
OFF_WL=$PYWL/py_offcpu.py
[ -x "$OFF_PY" ] || fail "$OFF_PY missing (make test-deps)"
# OFF_STACKS: the Pythons each test runs on, "TAG PYTHON": Debian's python3
# (3.11) and the sid root's python3.14 (python_lib.sh: sid_cmd; the job in
# its own mount namespace and chroot); off_use sets OFF_TAG and OFF_PY.
sid_need
OFF_STACKS=("debian $OFF_PY" "sid $(sid_cmd python3.14)")
off_use() { OFF_TAG=${1%% *} OFF_PY=${1#* }; }

# off_launch OUT MODE SECS [gpusample options]: `gpusample -- python3
# py_offcpu.py MODE` with GS_SECONDS=SECS.
off_launch() {
	local out=$1 mode=$2 secs=$3
	shift 3
	GS_SECONDS=$secs "$GS" -o "$out" -q --format pprof "$@" -- "$OFF_PY" "$OFF_WL" "$mode" \
		> "$out.json" 2> "$out.err" || { cat "$out.err"; fail "gpusample -- py_offcpu.py $mode failed"; }
}
