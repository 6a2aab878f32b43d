#!/bin/bash
# Issue 12: the target truncates a library it mapped while gpusample builds
# its unwind table and symbolizes it: gpusample keeps running, writes the
# profile, and that object is an error, not a crash (SIGBUS).
source "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make test-deps)"
lib=$(ls /usr/lib/x86_64-linux-gnu/libstdc++.so.6.* | head -1)
[ -f "$lib" ] || fail "libstdc++ missing"
cp "$lib" "$T/libvictim.so"
cp "$lib" "$T/orig.so"
/usr/bin/python3 -c "
import ctypes, time
ctypes.CDLL('$T/libvictim.so')
open('$T/ready', 'w').close()
t = time.time()
while time.time() - t < 60: sum(i * i for i in range(1000))
" &
py=$!
for _ in $(seq 50); do [ -e "$T/ready" ] && break; sleep 0.1; done
[ -e "$T/ready" ] || fail "workload did not start"
# Shrink and restore the mapped file, over and over, for the whole test.
(while :; do truncate -s 4096 "$T/libvictim.so"; dd if="$T/orig.so" of="$T/libvictim.so" conv=notrunc status=none; done) &
shrinker=$!
for i in 1 2 3 4; do
	"$GS" -q -p $py -d 1 -o "$T/run$i" 2>"$T/gs$i.err"
	rc=$?
	[ "$rc" = 0 ] || fail "run $i: gpusample exited $rc (signal $((rc - 128))?): $(tail -3 "$T/gs$i.err")"
	"$GS" report "$T/run$i.pb.gz" >"$T/rep$i" 2>&1 || fail "run $i: profile unreadable: $(cat "$T/rep$i")"
	kill -0 $py 2>/dev/null || fail "workload died"
done
kill $shrinker; wait $shrinker 2>/dev/null
ok "4 runs against a shrinking mapped library: all profiles written"
