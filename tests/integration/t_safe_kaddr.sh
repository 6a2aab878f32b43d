#!/bin/bash
# gs-test-timeout: 60
# Kernel addresses stay out of what gpusample writes unless asked for (the
# kernel hides them from users too: kernel.kptr_restrict, /proc/PID/stack):
# a job run as nobody with threads in system calls; its dump profile
# (pprof, html) and a -d 1 run's pprof, speedscope, folded and trace
# files name the kernel functions but hold no kernel address (pprof
# locations at 0, the [kernel.kallsyms] mapping at 0).  With
# GS_KERNEL_ADDRESSES=1 the dump keeps them (so the check can see them).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
[ -x /usr/bin/python3 ] || fail "/usr/bin/python3 missing (make deps)"
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import os, threading, time
def spin():
    while True:
        os.stat("/")
threading.Thread(target=spin, daemon=True).start()
time.sleep(20)' &
pid=$!
sleep 0.5

# kaddrs FILE: the raw kernel addresses in a pprof file's locations and
# mappings (0xffff8... and up), one a line
kaddrs() {
	pprof -raw "$1" > "$1.raw" || fail "go tool pprof -raw $1 failed: $(cat "$T/pprof.err")"
	grep -oiE '0xffff[89a-f][0-9a-f]{11}' "$1.raw" || true
}
# no_kaddr FILE...: no kernel address in text files, hex or decimal
no_kaddr() {
	for f in "$@"; do
		[ -s "$f" ] || fail "$f missing or empty"
		! grep -qiE 'ffff[89a-f][0-9a-f]{11}|18446[67][0-9]{14}' "$f" ||
			fail "kernel address in $f: $(grep -oiE 'ffff[89a-f][0-9a-f]{11}|18446[67][0-9]{14}' "$f" | head -3)"
	done
}

"$GS" dump -p "$pid" -o "$T/d" > "$T/d.txt" 2> "$T/d.err" || { cat "$T/d.err"; fail "gpusample dump failed"; }
grep -q "\[kernel\]" "$T/d.txt" || { cat "$T/d.txt"; fail "no kernel frame in the dump"; }
[ -z "$(kaddrs "$T/d.pb.gz")" ] || fail "dump profile has kernel addresses: $(kaddrs "$T/d.pb.gz" | head -3)"
grep -q "kallsyms" "$T/d.pb.gz.raw" || fail "no kernel mapping in the dump profile"
no_kaddr "$T/d.html" "$T/d.txt"

"$GS" -p "$pid" -d 1 -o "$T/r" --format pprof,speedscope,folded,trace > "$T/r.out" 2>&1 ||
	{ cat "$T/r.out"; fail "gpusample -p failed"; }
[ -z "$(kaddrs "$T/r.pb.gz")" ] || fail "run profile has kernel addresses: $(kaddrs "$T/r.pb.gz" | head -3)"
grep -q "do_syscall_64\|entry_SYSCALL" "$T/r.pb.gz.raw" || fail "no kernel frame in the run profile"
no_kaddr "$T/r.speedscope.json" "$T/r.cpu.folded" "$T/r.trace.json"

GS_KERNEL_ADDRESSES=1 "$GS" dump -p "$pid" -o "$T/k" > /dev/null 2> "$T/k.err" || { cat "$T/k.err"; fail "dump failed"; }
[ -n "$(kaddrs "$T/k.pb.gz")" ] || fail "GS_KERNEL_ADDRESSES=1: no kernel address kept"
kill "$pid"; wait "$pid" 2>/dev/null
ok "no kernel address in dump and run outputs (pprof, html, speedscope, folded, trace, text); kept with GS_KERNEL_ADDRESSES=1"
