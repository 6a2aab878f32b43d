# Sourced by the speedscope tools: $idx (speedscope's offline index.html),
# $chrome (the browser) and $file checked; exits 77 when a tool is missing.
# Needs $me (the tool's name) and $file.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
idx=$here/../node_modules/speedscope/dist/release/index.html
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || { echo "$me: chromium not installed (apt-get install chromium)"; exit 77; }
[ -f "$idx" ] || { echo "$me: $idx missing (cd tests && npm install speedscope@1.25.0)"; exit 77; }
[ -r "$file" ] || { echo "$me: cannot read $file"; exit 1; }
