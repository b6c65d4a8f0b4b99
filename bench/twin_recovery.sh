#!/usr/bin/env bash
# Benchmark (issue 27): profile the built-in simulator with hidden
# parameters, then predict the knee of three workloads the probes never sent
# and compare it with the simulator's own virtual-time knee.
#
# Draws SETS hidden parameter sets (seeds SEED .. SEED+SETS-1) from the
# documented range (examples/twin_recovery.rs says which and how), runs
# `kneecap profile --budget BUDGET` against `kneecap sim` with each, and
# `kneecap predict --profile` against `kneecap predict` given the hidden
# parameters, for 256/64, 2048/256 and 1024/128 with a 90% shared prefix.
# Prints one Markdown row per set, then per-parameter median relative error
# and, per workload, the share of predicted knees within ±10% of the truth.
#
# Usage: bench/twin_recovery.sh [SETS] [SEED] [BUDGET_S]   (default 20 1 30)
# TR_DIR=DIR keeps the profiles and predictions there (default a temp dir).
# About a minute per set on 2 cores (the profile runs in real time).
set -euo pipefail
cd "$(dirname "$0")/.."
SETS="${1:-20}"
SEED="${2:-1}"
BUDGET="${3:-30}"
cargo build --release --quiet --bin kneecap --example twin_recovery
TD="${CARGO_TARGET_DIR:-target}"
if [ -n "${TR_DIR:-}" ]; then
  DIR="$TR_DIR"
else
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
"$TD/release/examples/twin_recovery" --bin "$TD/release/kneecap" \
  --sets "$SETS" --seed "$SEED" --budget "$BUDGET" --dir "$DIR"
