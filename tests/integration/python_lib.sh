# Helpers for the t_python_*.sh tests (sourced after lib.sh).
# Every run goes through the user's path: `gpusample -o PREFIX -q -- PYTHON
# script.py` (or `-p PID`), and the profile is read back with the real viewer
# (`go tool pprof -traces -lines`, through tests/tools/pprof_stacks.py).
# py_stacks turns that into one line per sample:
#     PID TID COMM|root;...;leaf
# with only the Python frames, each as qualname@basename:line, plus the
# special "[truncated python stack]" / "[unknown python]" frames.
PYWL=$ROOT/tests/workloads

py_need_gs() {
	[ -x "$GS" ] || fail "$GS missing (run make BUILD=$BUILD)"
	go version >/dev/null 2>&1 || fail "go (golang-go) is needed for go tool pprof"
}

# The Debian sid root (scripts/sid-root.sh: python3.14, python3.15,
# PyTorch 2.x).  Jobs run inside it, in their own mount namespace, while
# gpusample stays outside: the container-like case, where every file of the
# target must be found through /proc/PID/root.
SID_ROOT=${GS_SID_ROOT:-/var/cache/gpusample/sid-root}

# sid_need: the sid root, built when missing (make test-deps builds it; about 4
# minutes on a first run); its absence fails the test.
sid_need() {
	"$ROOT/scripts/sid-root.sh" "$SID_ROOT" >"$T/sid-root.log" 2>&1 ||
		fail "sid root $SID_ROOT missing and scripts/sid-root.sh failed: $(tail -5 "$T/sid-root.log")"
}

# sid_wrap PATH COMMAND [MOUNTS]: an executable PATH that runs COMMAND
# (python3.14, "setpriv ... python3.14") inside the sid root: `unshare -m`
# (a private mount namespace), /proc /dev /sys, /tmp (the test's $T) and the
# checkout ($ROOT: the workloads) bound in at the same paths, then MOUNTS
# (shell; $r is the root), then `chroot ROOT COMMAND ARGS`.  Every step
# execs: the job keeps the pid the test started (attach mode needs it).
sid_wrap() {
	cat > "$1" <<EOS
#!/bin/sh
exec unshare -m --propagation private sh -c '
r=\$0
for d in /proc /dev /sys /tmp "$ROOT"; do
	mkdir -p "\$r\$d" && mount --rbind "\$d" "\$r\$d" || exit 1
done
${3:-true} || exit 1
exec chroot "\$r" $2 "\$@"' "$SID_ROOT" "\$@"
EOS
	chmod +x "$1"
}

# sid_cmd NAME: sid_wrap $T/sid/NAME NAME; prints the path; call sid_need
# first.
sid_cmd() {
	mkdir -p "$T/sid"
	sid_wrap "$T/sid/$1" "$1"
	echo "$T/sid/$1"
}

# py_interpreters: sets PYS to the interpreters to test: every pyenv CPython
# 3.8-3.13 found (optional: CI has none), Debian's python3, which CI
# installs, so its absence fails, and python3.14 and python3.15 of the sid
# root (sid_cmd; built by make test-deps, else here).  GS_PYTHONS="PY1 PY2"
# overrides (to debug one interpreter; sid:python3.14 names a sid one).
py_interpreters() {
	local v p
	PYS=()
	if [ -n "${GS_PYTHONS:-}" ]; then
		for p in $GS_PYTHONS; do
			case $p in sid:*) sid_need; PYS+=("$(sid_cmd "${p#sid:}")");; *) PYS+=("$p");; esac
		done
		return
	fi
	[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
	for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
		PYS+=($(ls -d /root/.pyenv/versions/$v.*/bin/python 2>/dev/null | head -1))
	done
	PYS+=(/usr/bin/python3)
	sid_need
	for v in 3.14 3.15; do
		PYS+=("$(sid_cmd python$v)")
	done
}

py_minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }

# py_stacks PROFILE.pb.gz: the Python part of each sample, root first (see top).
py_stacks() {
	pprof_stacks "$1" -lines > "$1.traces" ||
		fail "go tool pprof -traces -lines $1 failed: $(cat "$T/pprof.err")"
	awk -F'\t' '
	function lab(k,   m) {
		if (!match($2, "(^|,)" k "=[^,]*")) return "?"
		m = substr($2, RSTART, RLENGTH); sub(/^,?[^=]*=/, "", m); return m
	}
	{
		n = split($3, fr, ";"); out = ""
		for (i = n; i >= 1; i--) {
			f = fr[i]
			if (f ~ /^\[(truncated python stack|unknown python)\]/) {
				sub(/ *[^ ]*:[0-9]+$/, "", f)
			} else if (match(f, /^[^ ]+ /)) {
				name = substr(f, 1, RLENGTH - 1); rest = substr(f, RLENGTH + 1)
				if (!match(rest, /:[0-9]+$/)) continue
				file = substr(rest, 1, RSTART - 1); line = substr(rest, RSTART + 1)
				if (file !~ /\.py$/ && file !~ /^<.*>$/) continue
				sub(/.*\//, "", file)
				f = name "@" file ":" line
			} else continue
			out = out (out == "" ? "" : ";") f
		}
		for (k = 0; k < $1; k++) print lab("pid"), lab("tid"), lab("thread_name") "|" out
	}' "$1.traces"
}

# py_read OUT: OUT gets py_stacks of OUT.pb.gz, OUT.full the full -traces
# text (leaf;...;root).
py_read() {
	# a subshell: py_stacks's own failure message must not end up in $1
	(py_stacks "$1.pb.gz") > "$1" || { cat "$1"; exit 1; }
	cp "$1.pb.gz.traces" "$1.full"
}

# py_launch OUT PYTHON SCRIPT SECS [args]: `gpusample -- PYTHON SCRIPT args`
# with GS_SECONDS=SECS; OUT.pb.gz gets the profile, OUT.err gpusample's
# stderr, OUT and OUT.full as py_read.
py_launch() {
	local out=$1 py=$2 script=$3 secs=$4
	shift 4
	GS_SECONDS=$secs "$GS" -o "$out" -q --format pprof -- "$py" "$PYWL/$script" "$@" \
		> "$out.stdout" 2> "$out.err" || { cat "$out.err"; fail "gpusample -- $py $script failed"; }
	py_read "$out"
}

# py_profile_running OUT PYTHON SCRIPT SECS GO: `gpusample -p $py_pid` on the
# script started in the background (waiting for the GS_GO file GO), then
# release it; gpusample ends when the script exits.  Outputs as py_launch.
py_profile_running() {
	local out=$1 py=$2 script=$3 secs=$4 go=$5
	# shellcheck disable=SC2086 # PY_GS_ARGS: extra options, split on spaces
	gs_start -p "$py_pid" -d $((secs + 60)) -o "$out" -q --format pprof ${PY_GS_ARGS:-}
	touch "$go"
	wait "$py_pid" || fail "$py $script exited with $?"
	gs_wait
	cp "$T/gs.err" "$out.err"
	py_read "$out"
}

# py_attach OUT PYTHON SCRIPT SECS [args]: start the script (it waits for
# the GS_GO file), `gpusample -p PID`, then release the script; gpusample
# ends when the script exits.  Same outputs as py_launch; sets $py_pid.
py_attach() {
	local out=$1 py=$2 script=$3 secs=$4
	shift 4
	local go=$T/go.$$.$RANDOM
	GS_GO=$go GS_SECONDS=$secs "$py" "$PYWL/$script" "$@" > "$out.stdout" &
	py_pid=$!
	py_profile_running "$out" "$py" "$script" "$secs" "$go"
}

# py_report PROFILE.pb.gz: the processes (with their Python state) and the
# notes of a profile, for failure messages.
py_report() {
	"$GS" report "$1" 2>&1 | sed -n '/^Processes/,/^$/p; /^Notes/,/^$/p'
}

# py_attach_tree OUT PYTHON py_mp.py SECS METHOD: start the workers first
# (GS_READY), wait until both run, then `gpusample -p ROOT`, so that the
# workers are descendants found at attach time.  Same outputs as py_attach.
py_attach_tree() {
	local out=$1 py=$2 script=$3 secs=$4
	shift 4
	local go=$T/go.$$.$RANDOM ready=$T/ready.$$.$RANDOM
	GS_READY=$ready GS_GO=$go GS_SECONDS=$secs "$py" "$PYWL/$script" "$@" > "$out.stdout" &
	py_pid=$!
	for _ in $(seq 300); do
		[ "$(ls "$ready".* 2>/dev/null | wc -l)" -ge 2 ] && break
		sleep 0.1
	done
	[ "$(ls "$ready".* 2>/dev/null | wc -l)" -ge 2 ] || fail "$py $script: workers did not start"
	py_profile_running "$out" "$py" "$script" "$secs" "$go"
}

# Line number of the line of FILE containing MARKER.
marker_line() { grep -n "$2" "$1" | head -1 | cut -d: -f1; }
