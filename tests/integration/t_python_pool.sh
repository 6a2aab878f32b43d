#!/bin/bash
# Short-lived spawn workers, issue 13 done-when (3): `gpusample -- python
# py_pool.py` runs a spawn Pool with maxtasksperchild=1, so every task gets
# a fresh worker that imports, runs one task and exits.  Their code objects
# must be read while they exist (module bodies are freed when their import
# ends).  In the samples of the workers that ran a task:
#  - fewer than 2% of the Python frames are [unknown python];
#  - every worker has its task frames (pool_task at TASK_BURN);
#  - import-time frames resolve: import_burn always sits under the worker's
#    <module> of py_pool.py (run as __mp_main__) at AT_IMPORT;
#  - the profile's comments count what stayed unresolved.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/python_lib.sh"
py_need_gs
f=$PYWL/py_pool.py
L_TASK=$(marker_line "$f" TASK_BURN); L_IMP=$(marker_line "$f" AT_IMPORT)
pys=(/usr/bin/python3 $(ls -d /root/.pyenv/versions/3.12.*/bin/python 2>/dev/null | head -1))
[ -n "${GS_PYTHONS:-}" ] && read -ra pys <<< "$GS_PYTHONS"
for py in "${pys[@]}"; do
	py_launch "$T/pool" "$py" py_pool.py 0 10
	sed -n 's/^task //p' "$T/pool.stdout" | sort -u > "$T/workers"
	nw=$(wc -l < "$T/workers")
	[ "$nw" -ge 2 ] || fail "$py: $nw workers ran tasks: $(cat "$T/pool.stdout")"
	read -r frames unknown notask badimp imp < <(awk -v task="pool_task@py_pool.py:$L_TASK" \
		-v mod="<module>@py_pool.py:$L_IMP;import_burn@py_pool.py:" '
		NR == FNR { w[$1] = 1; next }
		!($1 in w) { next }
		{ split($0, a, "|"); n = split(a[2], fr, ";")
		  for (i = 1; i <= n; i++) { frames++; if (fr[i] ~ /^\[unknown python\]/) unknown++ }
		  if (index(a[2], task)) seen[$1] = 1
		  if (index(a[2], "import_burn@")) { imp++; if (!index(a[2], mod)) badimp++ } }
		END { for (p in w) if (!(p in seen)) notask++
		      printf "%d %d %d %d %d\n", frames, unknown, notask, badimp, imp }' "$T/workers" "$T/pool")
	comment=$(pprof -comments "$T/pool.pb.gz" | grep '^python code objects')
	echo "$py: $nw workers; $unknown of $frames Python frames unknown; $notask without task frames; $badimp of $imp import_burn samples without their <module>"
	echo "  profile comment: $comment"
	[ -n "$comment" ] || fail "$py: no 'python code objects' comment in the profile"
	[ "$frames" -ge 200 ] || fail "$py: only $frames Python frames in worker samples"
	awk -v u="$unknown" -v f="$frames" 'BEGIN { exit !(u < 0.02 * f) }' ||
		fail "$py: $unknown of $frames worker Python frames are [unknown python] (>= 2%)"
	[ "$notask" -eq 0 ] || fail "$py: $notask of $nw workers without task frames"
	[ "$imp" -ge 1 ] && [ "$badimp" -eq 0 ] || fail "$py: import-time frames unresolved ($badimp of $imp)"
done
ok "spawn pool workers resolved on ${#pys[@]} interpreters"
