#!/usr/bin/env bash
# Benchmark: can `kneecap sim` serve 2,000 concurrent streams at >= 50,000
# streamed tokens/s on this machine without falling behind its step clock,
# with the kneecap client (a separate process) as the load?
# Prints the client's summary and the sim's step-lag metrics.
# Usage: [SIM_FLAGS=--no-realtime] bench/sim_capacity.sh [STREAMS] [TOKENS_PER_STREAM]
set -euo pipefail
cd "$(dirname "$0")/.."
STREAMS="${1:-2000}"
TOKENS="${2:-300}"
cargo build --release --quiet
K=target/release/kneecap
LOG=$(mktemp)
trap 'kill $SIM 2>/dev/null || true; rm -f "$LOG"' EXIT
# A sim with room for every stream: step = 5 ms + 15 us x decoding seqs, so
# 2,000 streams decode one token each per ~35 ms step (~57k tokens/s).
$K sim --port 0 --max-num-seqs 4096 --max-num-batched-tokens 65536 --kv-cache-tokens 4000000 \
  --prefill-token-us 1 --decode-seq-us 15 ${SIM_FLAGS:-} 2>"$LOG" &
SIM=$!
for _ in $(seq 50); do grep -q "http://" "$LOG" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$LOG" | head -1)
echo "sim at $URL ($(nproc) cores, $(uname -r))"
$K run --base-url "$URL" --max-concurrency "$STREAMS" --num-prompts "$STREAMS" \
  --random-input-len 32 --random-output-len "$TOKENS" --disable-tqdm \
  --percentile-metrics ttft,itl --metric-percentiles 50,99 2>/dev/null |
  grep -E "Successful|Failed|duration|Output token throughput|Peak concurrent|TTFT|ITL|lateness"
echo "--- sim step clock (from its /metrics)"
curl -s "$URL/metrics" | grep -E "^kneecap_sim_(step_lag_seconds_(count|sum)|step_lag_max_seconds|engine_realtime)" || true
curl -s "$URL/metrics" | grep -E 'kneecap_sim_step_lag_seconds_bucket.*le="(0.00005|0.0001|0.00025|0.001|0.005)"' || true
