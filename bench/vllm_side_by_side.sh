#!/usr/bin/env bash
# Benchmark: kneecap beside vLLM's own client (`vllm bench serve`, from the
# same venv as the server) against the real vLLM engine on CPU
# (scripts/vllm-server.sh: vLLM 0.32, SmolLM2-135M shape, random weights).
#
# The same flags for both tools: random dataset, 128 in / 32 out, Poisson at
# RATE req/s, N prompts, seed 0, /v1/completions. The tools take turns
# (kneecap, vLLM, kneecap, vLLM, ... ROUNDS rounds) against one server, and
# every run is windowed by the server's own /metrics: its request and token
# counters and its TTFT and E2E histograms, so each tool's means can be set
# against the server's over the same requests. Client CPU is user + system
# of the tool's process and children (GNU time), start-up included.
#
# Usage: bench/vllm_side_by_side.sh [N] [RATE] [ROUNDS]     (default 80 2 2)
# Prints a Markdown table (BENCHMARKS.md's form) and keeps the JSONs in
# $KEEP (default: a temp dir, removed at exit).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-80}
RATE=${2:-2}
ROUNDS=${3:-2}
eval "$(scripts/vllm-server.sh env)"
cargo build --release --quiet
K=${CARGO_TARGET_DIR:-target}/release/kneecap
TMP=${KEEP:-$(mktemp -d)}
mkdir -p "$TMP"
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null || true
  [ -z "${KEEP:-}" ] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT
START=$(scripts/vllm-server.sh start)
URL=$(sed -n 's/^URL=//p' <<<"$START")
SERVER=$(sed -n 's/^PID=//p' <<<"$START")
echo "server $URL (pid $SERVER); $N prompts at $RATE req/s, $ROUNDS rounds" >&2

FLAGS="--backend vllm --endpoint /v1/completions --dataset-name random --random-input-len 128
  --random-output-len 32 --num-prompts $N --request-rate $RATE --seed 0
  --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99"

scrape() { curl -s "$URL/metrics" >"$1"; }

# tool name, result file, command...
one() {
  local tool=$1 out=$2
  shift 2
  scrape "$TMP/$out.before"
  /usr/bin/time -f '%U %S' -o "$TMP/$out.cpu" "$@" >"$TMP/$out.log" 2>&1
  scrape "$TMP/$out.after"
  echo "$tool $out" >>"$TMP/runs"
}

: >"$TMP/runs"
for r in $(seq 1 "$ROUNDS"); do
  # shellcheck disable=SC2086
  one kneecap "k$r" "$K" run --base-url "$URL" --tokenizer tests/data/smollm2-135m-tokenizer.json \
    $FLAGS --save-result --result-dir "$TMP" --result-filename "k$r.json" --disable-tqdm
  # shellcheck disable=SC2086
  one "vllm bench serve" "v$r" env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$KNEECAP_VLLM" bench serve \
    --base-url "$URL" --tokenizer "$KNEECAP_VLLM_MODEL" $FLAGS \
    --save-result --result-dir "$TMP" --result-filename "v$r.json"
done

python3 - "$TMP" <<'EOF'
import json, sys
d = sys.argv[1]

def metrics(path):
    sums = {}
    for line in open(path):
        if line.startswith("#") or " " not in line:
            continue
        head, value = line.rsplit(" ", 1)
        name = head.split("{")[0]
        sums[name] = sums.get(name, 0.0) + float(value)
    return sums

print("| run | completed | in / out tokens | server counted | TTFT p50 | TPOT p50 | E2EL p50 | TTFT mean − server's | E2E mean − server's | server E2E mean | client CPU s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(f"{d}/runs"):
    tool, run = line.rsplit(" ", 1)
    run = run.strip()
    j = json.load(open(f"{d}/{run}.json"))
    a, b = metrics(f"{d}/{run}.before"), metrics(f"{d}/{run}.after")
    delta = lambda n: b[n] - a[n]
    mean = lambda h: 1e3 * delta(h + "_sum") / delta(h + "_count")
    ttft, e2e = mean("vllm:time_to_first_token_seconds"), mean("vllm:e2e_request_latency_seconds")
    cpu = sum(float(x) for x in open(f"{d}/{run}.cpu").read().split()[-2:])
    counted = f"{delta('vllm:request_success_total'):.0f} req, {delta('vllm:prompt_tokens_total'):.0f} / {delta('vllm:generation_tokens_total'):.0f}"
    print(f"| {tool} {run[1:]} | {j['completed']} | {j['total_input_tokens']} / {j['total_output_tokens']} | {counted} "
          f"| {j['median_ttft_ms']:.1f} | {j['median_tpot_ms']:.1f} | {j['median_e2el_ms']:.0f} "
          f"| {j['mean_ttft_ms'] - ttft:+.1f} | {j['mean_e2el_ms'] - e2e:+.1f} | {e2e:.0f} | {cpu:.1f} |")
EOF
