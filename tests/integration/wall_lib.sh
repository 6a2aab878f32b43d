# Helpers for the t_wall_*.sh tests (sourced after lib.sh and python_lib.sh):
# run a py_wall.py workload under gpusample as a user would, and read the
# "Where the time goes" section of `gpusample report FILE.pb.gz`.

# wall_attach NAME MODE ARGS...: start tests/workloads/py_wall.py MODE
# $T/NAME.json ARGS, attach `gpusample -p PID -d $WALL_SECONDS` once it is ready (its
# DataLoader workers up, its CUDA context made; a pid in the READY file is
# the process to attach to), stop the loop after gpusample exits, and write the report
# to $T/NAME.report.  The workload's own figures are in $T/NAME.json.
# WALL_GS_ARGS: more gpusample options (e.g. --format); WALL_SECONDS: the
# -d duration (default 4); WALL_PY: the interpreter that runs the workload
# (default Debian's python3; python_lib.sh's sid_cmd for the sid root's).
WALL_SECONDS=${WALL_SECONDS:-4}
WALL_PY=${WALL_PY:-/usr/bin/python3}
wall_attach() {
	local name=$1 mode=$2 wl target
	shift 2
	"$WALL_PY" "$PYWL/py_wall.py" "$mode" "$T/$name.json" "$@" > "$T/$name.out" 2>&1 &
	wl=$!
	for _ in $(seq 1 600); do
		[ -e "$T/$name.json.ready" ] && break
		kill -0 "$wl" 2>/dev/null || { cat "$T/$name.out"; fail "$mode workload died"; }
		sleep 0.1
	done
	[ -e "$T/$name.json.ready" ] || fail "$mode workload not ready in 60 s"
	target=$(cat "$T/$name.json.ready")
	gs_start -p "${target:-$wl}" -d "$WALL_SECONDS" -q -o "$T/$name" ${WALL_GS_ARGS:-}
	gs_wait
	touch "$T/$name.json.stop"
	wait "$wl" || { cat "$T/$name.out"; fail "$mode workload exited with $?"; }
	wall_report "$name"
}

# wall_report NAME: $T/NAME.report from $T/NAME.pb.gz; fails when the
# profile has no off-CPU data (the split would be on-CPU only).
wall_report() {
	"$GS" report "$T/$1.pb.gz" > "$T/$1.report" || fail "gpusample report failed"
	sed -n '/^Where the time goes/,$p' "$T/$1.report"
	if grep -q "on-CPU only" "$T/$1.report"; then
		fail "no off-CPU data in the profile: the wall-clock split needs the off-CPU collector"
	fi
}

# wall_pct NAME CATEGORY: the % of CATEGORY in the first main thread's
# split ("    input wait  1.23 s  45.6%  stack"); 0 when absent.
wall_pct() {
	awk -v c="$2" '
		/^Where the time goes/ { on = 1; next }
		on && /main thread/ && seen++ { exit }
		on && index($0, "    " c " ") == 1 {
			for (i = 1; i <= NF; i++) if ($i ~ /%$/) { sub(/%/, "", $i); print $i; found = 1; exit }
		}
		END { if (!found) print 0 }' "$T/$1.report"
}

# wall_in NAME CATEGORY: the % of the first main thread's wall time spent
# in CATEGORY's frames, whatever the thread state: CATEGORY's row plus the
# CPU starvation "while in: CATEGORY N%" part (on a loaded machine a thread
# inside next(loader) or a synchronize also waits for a CPU, and the
# in-process timers count that too).
wall_in() {
	local row starved
	row=$(wall_pct "$1" "$2")
	starved=$(awk -v c="$2" '
		/^Where the time goes/ { on = 1; next }
		on && /main thread/ && seen++ { exit }
		on && /^      while in:/ {
			n = split(substr($0, index($0, ":") + 1), part, ",")
			for (i = 1; i <= n; i++) {
				v = part[i]; sub(/^ +/, "", v)
				if (index(v, c " ") == 1) { v = substr(v, length(c) + 2); sub(/%/, "", v); print v; found = 1 }
			}
			exit
		}
		END { if (!found) print 0 }' "$T/$1.report")
	awk -v a="$row" -v b="$starved" 'BEGIN { printf "%.1f", a + b }'
}

# window_pct NAME: the workload's in-process figure over the profile's
# window (its "window: CLOCK_MONOTONIC START s + DURATION s" comment: the
# clock of the workload's perf_counter): the % of it inside the timed calls
# ("spans" [start, end]), or for [time, run delay] points the run delay's
# growth over it.
window_pct() {
	/usr/bin/python3 - "$T/$1.json" "$T/$1.pb.gz" <<'PY'
import gzip, json, re, sys
d = json.load(open(sys.argv[1]))
m = re.search(rb"window: CLOCK_MONOTONIC ([0-9.]+) s \+ ([0-9.]+) s", gzip.open(sys.argv[2]).read())
if not m:
    sys.exit("the profile has no window comment")
t0 = float(m.group(1))
t1 = t0 + float(m.group(2))
sp = d["spans"]
if "run_delay_frac" in d:  # [time, cumulative run delay]: interpolate at t0, t1
    def at(t):
        for (ta, da), (tb, db) in zip(sp, sp[1:]):
            if ta <= t <= tb:
                return da + (db - da) * (t - ta) / (tb - ta)
        sys.exit("window %.3f-%.3f outside the loop %.3f-%.3f" % (t0, t1, sp[0][0], sp[-1][0]))
    print("%.1f" % (100 * (at(t1) - at(t0)) / (t1 - t0)))
else:
    if not sp or sp[0][0] > t0 + 0.1 or sp[-1][1] < t1 - 0.1:
        sys.exit("window %.3f-%.3f outside the loop" % (t0, t1))
    inside = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in sp)
    print("%.1f" % (100 * inside / (t1 - t0)))
PY
}

# wall_check NAME CATEGORY WHAT: the report's time in CATEGORY (wall_in)
# within 5 points of what the workload measured in-process over the same
# window (window_pct; WHAT names it); prints both, fails otherwise.  Sets
# $got and $truth.
wall_check() {
	local row
	truth=$(window_pct "$1") || fail "$1: no in-process figure for the profile's window"
	row=$(wall_pct "$1" "$2")
	got=$(wall_in "$1" "$2")
	echo "$1: in-process $3 ${truth}% of the profile's window (whole loop $(json_field "$1" loop_s) s); report: $2 ${row}%, ${got}% with the starvation while in it"
	within "$got" "$truth" 5 || fail "$1: $2 ${got}% is not within 5 points of ${truth}%"
}

# json_field NAME KEY: a number from the workload's $T/NAME.json.
json_field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$T/$1.json" "$2"; }

# within A B TOL: |A - B| <= TOL.
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }
