#!/bin/bash
# gs-test-timeout: 90
# A job (as nobody) of 20 processes with 60k anonymous mappings each (the
# default vm.max_map_count): gpusample dump keeps only what its maps caps
# allow (proc.h: anonymous data beyond GS_PROC_MAPS_ANON_MAX per process is
# dropped and counted), so its memory stays bounded (before: ~480 MB
# resident, about 400 B per mapping line; now: ~36 MB) and the profile says
# what was left out.  The Python stacks of all 20 are still there.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make deps)"
[ -x /usr/bin/time ] || fail "/usr/bin/time missing (make deps)"
chmod 755 "$T"
mkdir "$T/u"
chown nobody:nogroup "$T/u"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$PYWL/py_many_maps.py" \
	20 60000 "$T/u/ready" "$T/u/stop" > "$T/wl.out" 2>&1 &
pid=$!
n_ready() { find "$T/u" -name 'ready.*' | wc -l; }
for _ in $(seq 600); do [ "$(n_ready)" -eq 20 ] && break; sleep 0.1; done
[ "$(n_ready)" -eq 20 ] || { kill_tree "$pid"; fail "the 20 processes did not map: $(cat "$T/wl.out")"; }
lines=$(wc -l < "/proc/$pid/maps")
[ "$lines" -gt 59000 ] || { kill_tree "$pid"; fail "only $lines mappings in the job"; }
/usr/bin/time -f "%M %e" -o "$T/time" "$GS" dump -p "$pid" -o "$T/d" > "$T/dump.txt" 2> "$T/dump.err" ||
	{ touch "$T/u/stop"; kill_tree "$pid"; cat "$T/dump.err"; fail "gpusample dump failed"; }
touch "$T/u/stop"
wait "$pid"
read -r rss_kb secs < "$T/time"
echo "dump of 20 x $lines mappings: $((rss_kb / 1024)) MiB peak RSS, $secs s; $(head -1 "$T/dump.txt")"
grep -q "^gpusample dump: 20 processes, 20 threads in" "$T/dump.txt" || fail "expected 20 processes: $(head -1 "$T/dump.txt")"
[ "$(grep -c "py_many_maps.py:" "$T/dump.txt")" -ge 20 ] || fail "the Python stacks are missing"
[ "$rss_kb" -lt $((150 * 1024)) ] || fail "gpusample dump used $((rss_kb / 1024)) MiB (bound: 150 MiB)"
"$GS" report "$T/d.pb.gz" > "$T/report" 2>&1 || fail "gpusample report failed"
grep -q "maps: [0-9]* mapping lines left out in [0-9]* reads of a maps file" "$T/report" ||
	{ cat "$T/report"; fail "the profile does not say mappings were left out"; }
ok "dump of 20 processes x $lines mappings in $((rss_kb / 1024)) MiB, $secs s, the cap said"
