#!/usr/bin/env bash
# Benchmark (issue 25): the knee of a server whose prefix cache holds every
# prompt a sweep sends, with fresh prompts per step and with reused ones.
# The simulator: `tiny` with an 8M-token KV cache, 20 us per prefill token and
# an 8,192-token context; the sweep: random 4,096 in / 32 out,
# --rates 4,6,...,16, the SLO below (default p99 TTFT <= 500 ms). Three cases,
# each against its own simulator (an empty cache):
#   fresh   - each step draws its own prompts (the default), prefix caching on
#   reused  - --reuse-prompts (what every sweep did before), prefix caching on
#   nocache - --no-enable-prefix-caching: what fresh traffic sees
# Prints each case's knee bracket and each step's prefix-cache hit rate and
# p99 TTFT; the sweep JSONs are kept in OUT (default a temporary directory).
# Usage: bench/fresh_prompts.sh [SLO] [SEED]   KNEECAP_BIN=path, OUT=dir
set -euo pipefail
cd "$(dirname "$0")/.."
SLO="${1:-p99_ttft_ms<=500}"
SEED="${2:-0}"
if [ -z "${KNEECAP_BIN:-}" ]; then
  cargo build --release --quiet
fi
K="${KNEECAP_BIN:-target/release/kneecap}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
SIM=""
trap '[ -n "$SIM" ] && kill "$SIM" 2>/dev/null || true' EXIT
SIM_ARGS=(--port 0 --kv-cache-tokens 8000000 --prefill-token-us 20 --max-model-len 8192)

# One case: a fresh simulator with SIM_EXTRA, a sweep with SWEEP_EXTRA.
run_case() {
  local name="$1" sim_extra="$2" sweep_extra="$3"
  local log="$OUT/$name.sim.log"
  # shellcheck disable=SC2086
  "$K" sim "${SIM_ARGS[@]}" $sim_extra 2>"$log" &
  SIM=$!
  for _ in $(seq 100); do grep -q "http://" "$log" && break; sleep 0.1; done
  local url
  url=$(grep -o 'http://[0-9.:]*' "$log" | head -1)
  # shellcheck disable=SC2086
  "$K" sweep --base-url "$url" --random-input-len 4096 --random-output-len 32 \
    --rates 4,6,8,10,12,14,16 --slo "$SLO" --seed "$SEED" --disable-tqdm --ui plain \
    $sweep_extra -o "$OUT/$name.json" >"$OUT/$name.out" 2>"$OUT/$name.err" || true
  kill "$SIM" 2>/dev/null || true
  wait "$SIM" 2>/dev/null || true
  SIM=""
}

run_case fresh "" ""
run_case reused "" "--reuse-prompts"
run_case nocache "--no-enable-prefix-caching" ""

echo "SLO $SLO, seed $SEED, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; sweep JSONs in $OUT"
for name in fresh reused nocache; do
  jq -r --arg name "$name" '
    def pct: if . == null then "-" else (. * 1000 | round / 10 | tostring) + "%" end;
    "\($name): knee between \(.knee.last_pass // "-") and \(.knee.first_fail // "-") req/s",
    (.steps | sort_by(.load)[] |
      "  \(.load) req/s: \(.verdict), p99 TTFT \(.ttft_ms.p99 | round) ms, cache hit \(.prefix_cache.hit_rate | pct), prompts \(.prompts.draw // "-")")
  ' "$OUT/$name.json"
done
