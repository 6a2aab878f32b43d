#!/bin/bash
# The house's shape does not regress: scripts/arch-counts.sh --check fails
# when one of its counts (maps readers, per-process stores outside the
# process table, thread tables, stall tables, decodes per record type,
# handler-to-handler calls, lines in cli/, ...) rises above
# scripts/arch-counts.baseline.
source "$(dirname "$0")/lib.sh"
command -v nm >/dev/null || fail "nm missing (binutils)"
./scripts/arch-counts.sh --check "${BUILD:-build}" >"$T/counts" 2>&1 || {
	cat "$T/counts"
	fail "a count rose above scripts/arch-counts.baseline (above)"
}
ok "arch counts at or below their baseline: $(grep -c . "$T/counts") counts"
