#!/usr/bin/env bash
# Benchmark: dispatch lateness (sent − due) of kneecap's open-loop dispatcher
# at 100, 1,000 and 5,000 requests/s (Poisson), against the simulator with a
# near-zero service time and 4-token outputs, so the server is never the limit.
# Prints kneecap's own lateness line and generator self-check per rate.
# Usage: bench/dispatch.sh [SECONDS_PER_RATE]   (default 10)
# RATES="1000": only these rates (default "100 1000 5000").
# KNEECAP=path: use that binary instead of building target/release/kneecap.
# KNEECAP_UI=dashboard: run kneecap with its live dashboard on a pseudo-
# terminal (util-linux `script`), to measure what the dashboard costs.
# KNEECAP_UI=plain-tty: the same pseudo-terminal with `--ui plain`: the
# control for the dashboard (both pay for the terminal relay).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"
if [ -z "${KNEECAP:-}" ]; then cargo build --release --quiet; fi
K="${KNEECAP:-target/release/kneecap}"
# run_kneecap ARGS...: kneecap run, on a terminal with the dashboard when asked.
run_kneecap() {
  if [ "${KNEECAP_UI:-}" = dashboard ] || [ "${KNEECAP_UI:-}" = plain-tty ]; then
    local ui=${KNEECAP_UI%-tty}
    script -q -e -c "stty cols 120 rows 40; $K run $* --ui $ui 2>/dev/null" /dev/null | tr -d '\r'
  else
    $K run "$@" 2>/dev/null
  fi
}
LOG=$(mktemp)
trap 'kill $SIM 2>/dev/null || true; rm -f "$LOG"' EXIT
$K sim --port 0 --max-num-seqs 4096 --max-num-batched-tokens 65536 --kv-cache-tokens 4000000 \
  --step-base-ms 0.5 --prefill-token-us 0.1 --decode-seq-us 1 ${SIM_FLAGS:-} 2>"$LOG" &
SIM=$!
for _ in $(seq 50); do grep -q "http://" "$LOG" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$LOG" | head -1)
echo "sim at $URL ($(nproc) cores, ui ${KNEECAP_UI:-plain}, load average $(cut -d" " -f1-3 /proc/loadavg))"
for RATE in ${RATES:-100 1000 5000}; do
  N=$((RATE * SECS))
  echo "--- $RATE req/s, $N requests"
  run_kneecap --base-url "$URL" --request-rate "$RATE" --num-prompts "$N" --random-input-len 16 \
    --random-output-len 4 --disable-tqdm |
    grep -E "Successful|Failed|Request throughput|Dispatch lateness|Generator|GENERATOR"
done
