#!/usr/bin/env bash
# Benchmark: dispatch lateness (sent − due) of kneecap's open-loop dispatcher
# at 100, 1,000 and 5,000 requests/s (Poisson), against the simulator with a
# near-zero service time and 4-token outputs, so the server is never the limit.
# Prints kneecap's own lateness line and generator self-check per rate.
# Usage: bench/dispatch.sh [SECONDS_PER_RATE]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
cargo build --release --quiet
K=target/release/kneecap
LOG=$(mktemp)
trap 'kill $SIM 2>/dev/null || true; rm -f "$LOG"' EXIT
$K sim --port 0 --max-num-seqs 4096 --max-num-batched-tokens 65536 --kv-cache-tokens 4000000 \
  --step-base-ms 0.5 --prefill-token-us 0.1 --decode-seq-us 1 ${SIM_FLAGS:-} 2>"$LOG" &
SIM=$!
for _ in $(seq 50); do grep -q "http://" "$LOG" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$LOG" | head -1)
echo "sim at $URL ($(nproc) cores)"
for RATE in 100 1000 5000; do
  N=$((RATE * SECS))
  echo "--- $RATE req/s, $N requests"
  $K run --base-url "$URL" --request-rate "$RATE" --num-prompts "$N" --random-input-len 16 \
    --random-output-len 4 --disable-tqdm 2>/dev/null |
    grep -E "Successful|Failed|Request throughput|Dispatch lateness|Generator|GENERATOR"
done
