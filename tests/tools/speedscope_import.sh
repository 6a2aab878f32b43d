#!/bin/bash
# Load FILE into speedscope (the npm package's dist/release, offline) in
# headless Chromium, the way reference/output_formats.md §3.5 does, and check
# which importer speedscope picked.
#
#   tests/tools/speedscope_import.sh FILE [IMPORTER]
#
# IMPORTER is the text after "Importing as " in speedscope's console log;
# default from FILE's name: *.pb.gz|*.pb -> "protobuf encoded pprof file",
# *.json -> "speedscope json file", *.folded|*.txt -> "collapsed stack format".
# Exit 0 only if the console said "Importing as IMPORTER" and no alert()
# fired (speedscope alerts "Unrecognized format!" on junk); 1 otherwise;
# 77 if chromium or tests/node_modules/speedscope is missing.
# GS_SCREENSHOT=path.png keeps a screenshot of the rendered flame graph.
set -u
file=${1:?usage: speedscope_import.sh FILE [IMPORTER]}
me=speedscope_import
source "$(dirname "${BASH_SOURCE[0]}")/speedscope_env.sh"

base=$(basename "$file")
want=${2:-}
if [ -z "$want" ]; then
	case "$base" in
	*.pb.gz|*.pb) want="protobuf encoded pprof file" ;;
	*.json) want="speedscope json file" ;;
	*.folded|*.txt) want="collapsed stack format" ;;
	*) echo "speedscope_import: pass the expected importer for $base"; exit 2 ;;
	esac
fi

work=$(mktemp -d /tmp/gs-speedscope.XXXXXX)
trap 'rm -rf "$work"' EXIT
# alert() would go nowhere in headless mode: route it to the console.
printf 'window.alert=function(m){console.log("ALERT: "+m)};speedscope.loadFileFromBase64("%s","%s")\n' \
	"$base" "$(base64 -w0 "$file")" >"$work/load.js"
shot=${GS_SCREENSHOT:-$work/shot.png}
timeout 90 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-extensions --disable-sync --no-first-run --no-default-browser-check \
	--user-data-dir="$work/profile" --enable-logging=stderr --v=0 \
	--window-size=1400,700 --virtual-time-budget=5000 --screenshot="$shot" \
	"file://$idx#localProfilePath=$work/load.js&view=left-heavy" >"$work/stdout" 2>"$work/console.log"
rc=$?
seen=$(grep -o '"Importing as [^"]*"\|"ALERT[^"]*"' "$work/console.log" | tr -d '"' | sort -u)
echo "speedscope_import: $base (chromium exit $rc)"
if [ -n "$seen" ]; then
	printf '  console: %s\n' "$seen"
else
	echo "  console: nothing from speedscope; last lines:"
	tail -5 "$work/console.log" | sed 's/^/    /'
fi
if grep -q '"ALERT' "$work/console.log"; then
	echo "  FAIL: speedscope raised an alert"
	exit 1
fi
if grep -qF "\"Importing as $want\"" "$work/console.log"; then
	echo "  ok: imported as $want"
	exit 0
fi
echo "  FAIL: expected \"Importing as $want\""
exit 1
