#!/bin/bash
# Libraries loaded after attach: nofp_dlopen dlopens libnofp.so 1 s after
# sampling started.  BPF reports PCs outside every known mapping
# (gs_cfi_miss), gs_cfi_refresh re-reads the maps and adds the table while
# running.  Pass: a refresh happened and >= 90% of leaf samples carry
#   main;run_dl;nofp_lib_entry;lib_aligned;lib_recurse x5;(dl_callback;dl_leaf|lib_spin)
# (samples between the dlopen and the refresh may be short).
source "$(dirname "$0")/lib.sh"
P=$ROOT/$BUILD/tests/cfi_probe
W=$WL/nofp_dlopen
[ -x "$P" ] && [ -x "$W" ] || fail "build first: make BUILD=$BUILD test-helpers"

"$P" -d 5 -F 199 -- "$W" 30 > "$T/dl.folded" 2> "$T/dl.err" || fail "cfi_probe: $(tail -3 "$T/dl.err")"
grep -E '^(samples|unwind_|refreshes|tables)' "$T/dl.err"
refreshes=$(awk '/^refreshes /{print $2}' "$T/dl.err")
read -r full leaf < <(awk '{ n = $NF; $NF = ""; s = $0; sub(/ +$/, "", s)
	if (s ~ /;(dl_leaf|lib_spin)$/) { leaf += n
	  if (s ~ /(^|;)main;run_dl;nofp_lib_entry;lib_aligned;lib_recurse;lib_recurse;lib_recurse;lib_recurse;lib_recurse;(dl_callback;dl_leaf|lib_spin)$/) full += n } }
	END { printf "%d %d\n", full, leaf }' "$T/dl.folded")
echo "dlopen: $full of $leaf leaf samples carry the full chain; $refreshes refreshes"
[ "${refreshes:-0}" -ge 1 ] || fail "no refresh after dlopen"
[ "$leaf" -ge 100 ] || fail "only $leaf leaf samples"
ratio_at_least "$full" "$leaf" 0.90 || fail "only $full/$leaf leaf samples have the full chain after dlopen"
ok "dlopen after attach: $full/$leaf full chains, $refreshes refreshes"
