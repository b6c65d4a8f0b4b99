#!/usr/bin/env bash
# Benchmark (issue 39): how long one `kneecap predict` and one 3 x 3
# `predict --grid` take, this tree's release binary against commit OLD's
# (default 5e5ceb1, before the fast search), side by side, in alternating
# paired runs (old first in odd pairs, new first in even ones, so a load
# change on a shared machine falls on both), with the knees each gave.
#
# Both binaries predict from one profile of the built-in simulator
# (PROFILE, default tests/data/profile.json: a fixed file, so every run of
# this script asks the same question; a fresh `kneecap profile` on a busy
# machine can flag misfits that change it), for 1024/128 and p99 TTFT <=
# 500 ms with every other flag at its default (20,000 requests x 3 seeds
# per run, the profile's corners, what moves it), and the 3 x 3 grid of
# prompts 256, 1024, 2048 x outputs 64, 256, 512.
#
# Usage: bench/twin_speed.sh [PAIRS] [GRID_PAIRS]   (default 3 1)
# OLD=<commit> picks the old side; its binary is built in a git worktree of
# that commit (OLD_DIR, default target/twin-speed-old) with its own target
# dir, release profile. TS_DIR=DIR keeps the predictions there.
# The old grid takes minutes (230 s for 2 x 3 cells at 5e5ceb1).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS="${1:-3}"
GRID_PAIRS="${2:-1}"
# A run still going after CAP_S seconds is stopped and reported as such.
CAP_S="${CAP_S:-900}"
OLD="${OLD:-5e5ceb1}"
OLD_DIR="${OLD_DIR:-target/twin-speed-old}"
TD="${CARGO_TARGET_DIR:-target}"

cargo build --release --quiet --bin kneecap
NEW_BIN="$TD/release/kneecap"
if [ ! -d "$OLD_DIR" ]; then
  git worktree add --detach "$OLD_DIR" "$OLD" >/dev/null
fi
(cd "$OLD_DIR" && git checkout --quiet --detach "$OLD" &&
  CARGO_TARGET_DIR="$PWD/target" cargo build --release --quiet --bin kneecap)
OLD_BIN="$OLD_DIR/target/release/kneecap"

if [ -n "${TS_DIR:-}" ]; then
  DIR="$TS_DIR"
  mkdir -p "$DIR"
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
PROFILE="${PROFILE:-tests/data/profile.json}"

ONE=(predict --profile "$PROFILE" --slo 'p99_ttft_ms<=500')
GRID=(predict --profile "$PROFILE" --slo 'p99_ttft_ms<=500' --grid
  --grid-input 256,1024,2048 --grid-output 64,256,512)

# Runs one side once: prints "wall cpu knees" (knees: the single
# prediction's "knee [low-high]", or every grid cell's knee).
one_run() {
  local side="$1" bin="$2" what="$3"
  shift 3
  local out="$DIR/$what-$side.json" t="$DIR/time"
  rm -f "$out"
  if ! /usr/bin/time -f '%e %U %S' -o "$t" timeout -k 5 "$CAP_S" "$bin" "$@" -o "$out" >/dev/null 2>&1 &&
    [ ! -s "$out" ]; then
    echo ">$CAP_S - stopped-unfinished-at-CAP_S"
    return
  fi
  local knees
  if [ "$what" = grid ]; then
    knees=$(jq -r '[.grid[] | .prediction.knee_req_s // "-" | tostring | .[0:6]] | join(",")' "$out")
  else
    knees=$(jq -r '.knee | "\(.knee_req_s * 1000 | round / 1000) [\(.low_req_s * 1000 | round / 1000)-\(.high_req_s * 1000 | round / 1000)]"' "$out")
  fi
  awk -v k="$knees" '{ printf "%.2f %.2f %s\n", $1, $2 + $3, k }' "$t"
}

# PAIRS alternating pairs of `what`; one Markdown row per run.
pairs() {
  local what="$1" n="$2"
  shift 2
  for i in $(seq 1 "$n"); do
    local order=(old new)
    [ $((i % 2)) -eq 0 ] && order=(new old)
    for side in "${order[@]}"; do
      local bin="$NEW_BIN"
      [ "$side" = old ] && bin="$OLD_BIN"
      read -r wall cpu knees < <(one_run "$side" "$bin" "$what" "$@")
      echo "| $what | $i | $side | $wall | $cpu | $knees | $(cut -d' ' -f1-3 /proc/loadavg) |"
    done
  done
}

echo "old: $OLD ($OLD_BIN); new: $(git rev-parse --short HEAD)$(git diff --quiet || echo +dirty) ($NEW_BIN); $(nproc) cores"
echo
echo "| case | pair | side | wall s | CPU s | knee [interval] req/s (grid: every cell's knee) | load 1/5/15 min |"
echo "|---|---|---|---|---|---|---|"
pairs predict "$PAIRS" "${ONE[@]}"
pairs grid "$GRID_PAIRS" "${GRID[@]}"
