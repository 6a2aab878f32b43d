#!/bin/bash
# Open FILE in speedscope (the npm package's dist/release, offline) in
# headless Chromium and print the profile it shows first: the toolbar's
# title and its "(i/n)" position, e.g. "python3 pid 12 tid 12 (main) (1/42)".
#
#   tests/tools/speedscope_opens.sh FILE
#
# Exit 0 with that line; 1 if speedscope showed no profile; 77 if chromium
# or tests/node_modules/speedscope is missing.
set -u
file=${1:?usage: speedscope_opens.sh FILE}
me=speedscope_opens
source "$(dirname "${BASH_SOURCE[0]}")/speedscope_env.sh"
work=$(mktemp -d /tmp/gs-speedscope.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf 'speedscope.loadFileFromBase64("%s","%s")\n' "$(basename "$file")" "$(base64 -w0 "$file")" >"$work/load.js"
timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-extensions --disable-sync --no-first-run --no-default-browser-check \
	--user-data-dir="$work/profile" --virtual-time-budget=5000 --dump-dom \
	"file://$idx#localProfilePath=$work/load.js" >"$work/dom.html" 2>"$work/console.log"
# The toolbar: "<title text></span><span>(i/n)</span>"; tags become '|'.
shown=$(sed 's/<[^>]*>/|/g' "$work/dom.html" | grep -o '|[^|]*|([0-9]*/[0-9]*)|' | head -1 |
	sed 's/^|//; s/ *|(/ (/; s/|$//')
[ -n "$shown" ] || { echo "speedscope_opens: no profile shown"; exit 1; }
echo "$shown"
