#!/usr/bin/env bash
# Regenerate the sample sweep output in README.md from a real run, so it
# cannot go stale. Runs the README's first command (the built-in simulator,
# about 1.5 min on 2 cores) and replaces the text between the markers
#   <!-- sweep-output:begin --> ... <!-- sweep-output:end -->
# Usage: scripts/readme-output.sh            (rewrite README.md)
#        scripts/readme-output.sh --print    (print the new block only)
# The terminal charts after the knee block are left out; the rest is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
out=$(mktemp)
trap 'rm -f "$out" "$out.json" "$out.new" "$out.body"' EXIT
# The command a new user runs first (README "The two commands").
./target/release/kneecap sweep --slo 'p99_ttft_ms<=500' -o "$out.json" >"$out" 2>&1 || {
  status=$?
  # 1 = the sweep completed but an SLO failed somewhere: still real output.
  [ "$status" -eq 1 ] || { cat "$out" >&2; exit "$status"; }
}
# Stop where the terminal charts begin; drop trailing blanks.
block=$(sed -e '/^throughput vs offered load/,$d' -e 's/[[:space:]]*$//' "$out")
if [ "${1:-}" = "--print" ]; then
  printf '%s\n' "$block"
  exit 0
fi
begin='<!-- sweep-output:begin -->'
end='<!-- sweep-output:end -->'
grep -q "$begin" README.md && grep -q "$end" README.md || {
  echo "README.md: markers '$begin' / '$end' not found; add them around the sample output" >&2
  exit 2
}
printf '%s\n' "$block" >"$out.body"
awk -v begin="$begin" -v end="$end" -v body="$out.body" '
  $0 == begin { print; print "```text"; while ((getline line < body) > 0) print line; print "```"; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }
' README.md >"$out.new"
mv "$out.new" README.md
echo "README.md: sample sweep output regenerated ($(printf '%s\n' "$block" | wc -l) lines)"
