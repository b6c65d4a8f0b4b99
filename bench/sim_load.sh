#!/usr/bin/env bash
# Measure the simulator under 2,000 concurrent streams (~57k tokens/s) with an
# in-process hyper client, and print throughput and step-clock lag.
# Usage: bench/sim_load.sh [STREAMS] [TOKENS_PER_STREAM]
# Release build: takes a couple of minutes the first time on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_LOAD_STREAMS="${1:-2000}" SIM_LOAD_TOKENS="${2:-300}" \
  cargo test --release --test it -- --ignored --nocapture sim_load::two_thousand_streams 2>&1 |
  grep -E 'streams x|test result|panicked'
