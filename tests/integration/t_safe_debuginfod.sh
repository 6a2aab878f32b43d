#!/bin/bash
# gs-test-timeout: 120
# debuginfod answers are checked before libdw reads them, and what is
# refused leaves root's cache.  A job run as nobody maps two stripped
# libraries; a server on 127.0.0.1 (DEBUGINFOD_URLS) answers for
#  - libdbomb's build-id: a debug file carrying that build-id whose .debug_*
#    sections are zlib streams inflating to 3 x 256 MiB: it took root's
#    gpusample to 1 GB and stayed in the cache (later runs read it with the
#    server gone); now it is refused by its compressed sections, deleted,
#    and the run stays small;
#  - libdjunk's: 1 MiB without a Content-Length: refused, and the note says
#    why.
# A dump (of a process blocked in libdjunk) stopped by SIGINT while the
# server trickles an answer ends at once, the transfer abandoned (it went on
# for the run's 10 s debuginfod budget), and is written, noting both.
# The cache is bounded: with GS_DEBUGINFOD_CACHE_MB=1, three 512 KiB
# entries last used in 2001-2003 go oldest first, named in a note.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debug_lib.sh"
[ -x /usr/bin/time ] || fail "/usr/bin/time missing (package time)"
[ -e /usr/lib/x86_64-linux-gnu/libdebuginfod.so.1 ] || fail "libdebuginfod.so.1 missing (libdebuginfod1)"
chmod 755 "$T"
tok="$$_$RANDOM$RANDOM" # new build-ids each run: the server must answer, not the cache
for l in dbomb djunk; do
	cat >"$T/lib$l.c" <<C
#include <unistd.h>
volatile unsigned long sink;
const char *token = "$tok";
void ${l}_spin(void) { for (;;) for (unsigned long i = 0; i < 100000000ul; i++) sink += i * i; }
void ${l}_nap(void) { for (;;) sleep(1); }
C
	gcc -g -O1 -shared -fPIC -Wl,--build-id=sha1 -o "$T/lib$l.full.so" "$T/lib$l.c" || fail "cc $l"
	strip --strip-debug --strip-unneeded -o "$T/lib$l.so" "$T/lib$l.full.so" || fail "strip $l"
	eval "bid_$l=$(readelf -n "$T/lib$l.so" | awk '/Build ID/{print $3}')"
done
[ ${#bid_dbomb} -eq 40 ] && [ ${#bid_djunk} -eq 40 ] || fail "no build-ids"
# the bomb: the library's own debug file (its build-id note), DWARF replaced
objcopy --only-keep-debug "$T/libdbomb.full.so" "$T/keep.debug" || fail "keep-debug"
strip --strip-debug -o "$T/nodwarf.debug" "$T/keep.debug" || fail "strip debug"
debug_bomb "$T/nodwarf.debug" "$T/bomb.debug" 256 3
cache=/var/cache/gpusample/debuginfod
olds=""
for y in 2001 2002 2003; do
	o=$(echo "old $y $tok" | sha1sum | cut -c1-40)
	olds="$olds $o"
	mkdir -p "$cache/$o"
	head -c 512K /dev/urandom >"$cache/$o/debuginfo"
	touch -d "$y-01-01" "$cache/$o/debuginfo"
done
set -- $olds
trap 'rm -rf "$cache/$bid_dbomb" "$cache/$bid_djunk"; for o in $olds; do rm -rf "${cache:?}/$o"; done; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${GS_KEEP:-}" ] || rm -rf "$T"' EXIT

python3 - "$T/bomb.debug" "$bid_dbomb" "$bid_djunk" "$T/slow" >"$T/srv.port" 2>"$T/srv.log" <<'PY' &
import http.server, os, sys, time
bomb, bid_bomb, bid_junk = open(sys.argv[1], "rb").read(), sys.argv[2], sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        if os.path.exists(sys.argv[4]):  # trickle 1 MiB at 10 KiB/s
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 20))
            self.end_headers()
            for _ in range(1024):
                self.wfile.write(b"x" * 1024)
                self.wfile.flush()
                time.sleep(0.1)
        elif self.path == f"/buildid/{bid_bomb}/debuginfo":
            self.send_response(200)
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            self.wfile.write(bomb)
        elif self.path == f"/buildid/{bid_junk}/debuginfo":
            self.send_response(200)  # no Content-Length: ends when the connection does
            self.end_headers()
            self.wfile.write(b"junk" * (1 << 18))
        else:
            self.send_error(404)
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
PY
for _ in $(seq 1 50); do [ -s "$T/srv.port" ] && break; sleep 0.1; done
port=$(cat "$T/srv.port")
[ -n "$port" ] || fail "server did not start: $(cat "$T/srv.log")"
chown nobody:nogroup "$T"/lib*.so
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c "
import ctypes, threading
a, b = ctypes.CDLL('$T/libdbomb.so'), ctypes.CDLL('$T/libdjunk.so')
threading.Thread(target=b.djunk_spin, daemon=True).start()
a.dbomb_spin()
" &
job=$!
sleep 1
kill -0 $job 2>/dev/null || fail "job did not start"

GS_DEBUGINFOD_CACHE_MB=1 DEBUGINFOD_URLS="http://127.0.0.1:$port" /usr/bin/time -f '%M' -o "$T/rss" \
	timeout -k 5 50 "$GS" -q -p $job -d 2 -o "$T/out" 2>"$T/gs.err"
rc=$?
kb=$(tail -1 "$T/rss")
[ $rc -lt 124 ] || fail "gpusample hung (rc $rc): $(tail -3 "$T/gs.err")"
[ -s "$T/out.pb.gz" ] || fail "no profile (rc $rc): $(tail -3 "$T/gs.err")"
[ "$kb" -lt 400000 ] || fail "peak RSS $kb KiB: the served sections were inflated"
"$GS" report "$T/out.pb.gz" >"$T/rep" 2>&1 || fail "report: $(tail -3 "$T/rep")"
grep -q "GET /buildid/$bid_dbomb/debuginfo" "$T/srv.log" || fail "the server was not asked: $(cat "$T/srv.log")"
grep -q 'debuginfod refused 2 file(s).*1 sent without a Content-Length.*1 failing the checks of a debug file (first: compressed sections' "$T/rep" ||
	fail "no note of the refusals: $(grep -i debuginfod "$T/rep")"
[ ! -e "$cache/$bid_dbomb/debuginfo" ] || fail "the refused file stayed in root's cache"
[ ! -e "$cache/$bid_djunk/debuginfo" ] || fail "the answer without a length stayed in root's cache"
ok "served bomb refused and deleted, length-less answer refused, noted; peak RSS $kb KiB"
[ ! -e "$cache/$1" ] || fail "the cache was not pruned: the 2001 entry stayed"
grep -q 'debuginfod: [1-9][0-9]* least recently used build-id(s) deleted .*(kept within 1 MiB)' "$T/rep" ||
	fail "no note of the pruning: $(grep -i debuginfod "$T/rep")"
ok "the cache kept within its bound, oldest first, noted"
kill $job

# SIGINT during a dump's slow debuginfod transfer
touch "$T/slow"
nobody_py "$T/libdjunk.so" djunk_nap
asked=$(grep -c 'GET /buildid/' "$T/srv.log")
DEBUGINFOD_URLS="http://127.0.0.1:$port" env --default-signal=INT "$GS" dump -p $job -o "$T/dump" \
	>"$T/dump.out" 2>"$T/dump.err" &
dp=$!
for _ in $(seq 1 100); do
	[ "$(grep -c 'GET /buildid/' "$T/srv.log")" -gt "$asked" ] && break
	kill -0 $dp 2>/dev/null || fail "dump ended without asking debuginfod: $(tail -3 "$T/dump.err")"
	sleep 0.1
done
sleep 0.5
stop_timed INT $dp "dump during a debuginfod transfer"
dump_cut_check INT "$T/dump"
grep -q 'debuginfod: [1-9][0-9]* module(s) not fetched, .*a stop was asked' "$T/dump.rep" ||
	fail "dump: no note of the stopped transfer: $(grep -i debuginfod "$T/dump.rep")"
ok "SIGINT during a dump's debuginfod transfer: ended in ${ms} ms, profile written, noted"
kill $job
