#!/bin/bash
# gs-test-timeout: 900
# Issue 21 item 4: gpusample's BPF programs load and work on Debian's cloud
# kernels 5.10, 6.1, 6.12 and 7.x (booted under QEMU, software emulation) and
# on the running kernel: scripts/kernel-matrix.sh, whose table ends up in this
# test's log (consoles in build/kernel-matrix/).  2-4 minutes once the kernels
# are in the cache (`make test-deps` fetches them; the first run downloads ~100 MB).
# The timeout above (run.sh reads it) leaves room for the first download and
# for kernels whose verifier runs to its limit (~1-2 min each under TCG).
source "$(dirname "$0")/lib.sh"
[ -x "$GS" ] || fail "$GS missing (make)"
"$ROOT/scripts/kernel-matrix.sh" || fail "kernel matrix (table above; a missing prerequisite fails too)"
ok "every kernel loads gpusample's programs; C chain, Python chain and off-CPU time as expected"
