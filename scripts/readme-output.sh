#!/usr/bin/env bash
# Regenerate the sample outputs in README.md from real runs, so they cannot
# go stale. Each block sits between markers:
#   sweep: <!-- sweep-output:begin --> ... <!-- sweep-output:end -->
#          the README's first command (the built-in simulator, ~1.5 min on 2
#          cores); the terminal charts after the knee block are left out.
#   twin:  <!-- twin-output:begin --> ... <!-- twin-output:end -->
#          profile the simulator, predict a grid from the profile, and a sweep
#          opened by the twin (~3 min).
# Usage: scripts/readme-output.sh [sweep|twin|all] [--print]
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
print=${2:-}
[ "$which" = "--print" ] && { which=all; print=--print; }
cargo build --release --quiet
K=$PWD/target/release/kneecap
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Run a command whose exit status 1 still means real output (an SLO failed).
tolerant() {
  "$@" || { status=$?; [ "$status" -eq 1 ] || exit "$status"; }
}

sweep_block() {
  tolerant "$K" sweep --slo 'p99_ttft_ms<=500' -o "$tmp/sweep.json" >"$tmp/sweep.out" 2>&1
  # Stop where the terminal charts begin; drop trailing blanks.
  sed -e '/^throughput vs offered load/,$d' -e 's/[[:space:]]*$//' "$tmp/sweep.out"
}

twin_block() {
  (cd "$tmp" && "$K" profile --budget 30 -o profile.json >profile.out 2>profile.err)
  (cd "$tmp" && tolerant "$K" predict --profile profile.json --grid --slo 'p99_ttft_ms<=500' >grid.out 2>grid.err)
  (cd "$tmp" && tolerant "$K" sweep --twin profile.json --slo 'p99_ttft_ms<=500' -o twin.json >twin.out 2>twin.err)
  echo '$ kneecap profile --budget 30 -o profile.json'
  cat "$tmp/profile.out"
  echo
  echo "\$ kneecap predict --profile profile.json --grid --slo 'p99_ttft_ms<=500'"
  cat "$tmp/grid.out"
  echo
  echo "\$ kneecap sweep --twin profile.json --slo 'p99_ttft_ms<=500'"
  grep -E '^kneecap sweep: twin|^  step ' "$tmp/twin.err"
  echo '...'
  grep -E '^(knee:|binds:|predicted knee:)' "$tmp/twin.out"
}

replace() {
  local name=$1 body=$2
  local begin="<!-- $name-output:begin -->" end="<!-- $name-output:end -->"
  grep -q "$begin" README.md && grep -q "$end" README.md || {
    echo "README.md: markers '$begin' / '$end' not found; add them around the sample output" >&2
    exit 2
  }
  awk -v begin="$begin" -v end="$end" -v body="$body" '
    $0 == begin { print; print "```text"; while ((getline line < body) > 0) print line; print "```"; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
  ' README.md >"$tmp/README.new"
  mv "$tmp/README.new" README.md
  echo "README.md: $name output regenerated ($(wc -l <"$body") lines)"
}

for name in sweep twin; do
  [ "$which" = all ] || [ "$which" = "$name" ] || continue
  "${name}_block" | sed -e 's/[[:space:]]*$//' >"$tmp/$name.body"
  if [ "$print" = --print ]; then
    cat "$tmp/$name.body"
  else
    replace "$name" "$tmp/$name.body"
  fi
done
