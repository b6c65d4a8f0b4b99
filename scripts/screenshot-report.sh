#!/usr/bin/env bash
# Screenshot a kneecap HTML report with headless Chromium, to check by eye that
# its inline SVG charts render. Usage: scripts/screenshot-report.sh REPORT.html OUT.png [WIDTHxHEIGHT]
# Needs chromium (Debian: apt-get install -y chromium). Network features are off:
# the report must render from the file alone.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1200x2000}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "chromium not found (apt-get install -y chromium)" >&2
  exit 1
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$profile" \
  --screenshot="$out" --window-size="${size/x/,}" "file://$report" 2>/dev/null
test -s "$out"
echo "$out"

# Console check: load the page again with Chromium's logging on and fail on
# any console message or failed load; count the rendered charts from the DOM.
log=$(mktemp)
dom=$(mktemp)
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --enable-logging=stderr --v=0 \
  --dump-dom "file://$report" >"$dom" 2>"$log" || true
if grep -E "CONSOLE|Uncaught|Failed to load|net::ERR" "$log"; then
  echo "console errors in $report" >&2
  exit 1
fi
echo "no console errors; $(grep -o '<svg' "$dom" | wc -l) SVG charts in the rendered DOM"
rm -f "$log" "$dom"
