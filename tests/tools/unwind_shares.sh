#!/bin/bash
# unwind_shares.sh PROFILE.pb.gz: the shares of stacks (CPU samples and
# off-CPU stacks, by thread_state) that the native unwind cut at the depth
# bound ([truncated]: GS_MAX_USER_FRAMES) or ended in code without a table
# (an [unknown] root-most frame), read through the real viewer's decoder
# (pprof_stacks.py).  Issue 22, item 5 measures start-up with it.
# Output: one line per state and "all": STATE STACKS TRUNCATED% UNKNOWN_ROOT%
set -euo pipefail
"$(dirname "$0")/pprof_stacks.py" "$1" | awk -F'\t' '
{
	st = "?"
	if (match($2, /thread_state=[a-z_-]*/)) st = substr($2, RSTART + 13, RLENGTH - 13)
	n[st]++; n["all"]++
	if ($3 ~ /\[truncated\]/) { t[st]++; t["all"]++ }
	k = split($3, f, ";")
	if (f[k] == "[unknown]") { u[st]++; u["all"]++ }
}
END {
	for (s in n)
		printf "%s %d %.1f %.1f\n", s, n[s], 100 * t[s] / n[s], 100 * u[s] / n[s]
}' | sort
