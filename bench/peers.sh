#!/usr/bin/env bash
# Benchmark: kneecap side by side with vLLM's Rust client `vllm-bench`,
# `vllm bench serve` (vLLM 0.33.0), GuideLLM 0.8.1 and AIPerf 0.13.0, on the
# same workload against the same
# `kneecap sim` (restarted for every tool x rate, so each run has its own
# server-side --trace).
#
# Workload per level: Poisson arrivals at R req/s for SECS seconds
# (N = R x SECS requests), 32-token random prompts, 64 output tokens with
# ignore_eos, streaming /v1/completions over HTTP/1.1 for every tool.
# Measured tool-independently from the sim's trace: the arrival rate the
# server saw, server-side TTFT (first token handed to the connection minus
# the kernel's receive time of the request's last byte: the sim's
# `arrival_rx_s`), completed requests. From each tool: its own TTFT
# p50/p99 (-> TTFT inflation = tool - server), and its CPU time (user+sys,
# GNU time, children included) minus its start-up CPU (measured once per
# tool with a 1-request run).
# Prints a table per run and a summary (bench/peers_report.py).
#
# Usage: bench/peers.sh [SECS_PER_LEVEL]        (default 12)
# Environment:
#   PEERS_DIR    where the peers' venvs live (created with pip if missing;
#                default ~/.cache/kneecap/peers): $PEERS_DIR/{vllm,guidellm,aiperf}
#   PEERS_RATES  the rate ladder, req/s (default "50 200 800")
#   PEERS_TOOLS  which tools (default "kneecap vllm-bench vllm guidellm aiperf")
#   VLLM_BENCH_BIN  vLLM's Rust `vllm-bench` (built from source, see the
#                environment notes; default: `vllm-bench` on PATH; skipped
#                when absent)
#   PEERS_KEEP   a directory to keep every artifact in (default: a temp dir,
#                removed at exit)
# Needs python3 (with venv), GNU time at /usr/bin/time, cargo, and access to
# PyPI / crates.io the first time (venvs, tiktoken-rs for AIPerf's tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-12}"
RATES="${PEERS_RATES:-50 200 800}"
TOOLS="${PEERS_TOOLS:-kneecap vllm-bench vllm guidellm aiperf}"
VLLM_BENCH_BIN="${VLLM_BENCH_BIN:-vllm-bench}"
if [[ " $TOOLS " == *" vllm-bench "* ]] && ! command -v "$VLLM_BENCH_BIN" >/dev/null && [ ! -x "$VLLM_BENCH_BIN" ]; then
  echo "vllm-bench: skipped ($VLLM_BENCH_BIN not found; set VLLM_BENCH_BIN)"
  TOOLS=$(echo " $TOOLS " | sed 's/ vllm-bench / /; s/^ //; s/ $//')
fi
PEERS_DIR="${PEERS_DIR:-$HOME/.cache/kneecap/peers}"
REPO=$(pwd)
T0=$(date +%s)

cargo build --release --quiet
TD="${CARGO_TARGET_DIR:-target}"
[[ "$TD" = /* ]] || TD="$REPO/$TD"
K="$TD/release/kneecap"
if [ -n "${PEERS_KEEP:-}" ]; then
  TMP=$(mkdir -p "$PEERS_KEEP" && cd "$PEERS_KEEP" && pwd)
else
  TMP=$(mktemp -d)
fi
SIM=""
cleanup() {
  [ -n "$SIM" ] && kill "$SIM" 2>/dev/null || true
  [ -z "${PEERS_KEEP:-}" ] && rm -rf "$TMP"
  return 0
}
trap cleanup EXIT

# ---- peers' venvs (pinned versions) ----
declare -A PIN=([vllm]=vllm==0.33.0 [guidellm]=guidellm==0.8.1 [aiperf]=aiperf==0.13.0)
for t in vllm guidellm aiperf; do
  case " $TOOLS " in *" $t "*) ;; *) continue ;; esac
  if [ ! -x "$PEERS_DIR/$t/bin/$t" ]; then
    echo "creating venv $PEERS_DIR/$t (pip install ${PIN[$t]}; takes minutes, GBs)"
    python3 -m venv "$PEERS_DIR/$t"
    "$PEERS_DIR/$t/bin/pip" install --quiet "${PIN[$t]}"
  fi
done

# ---- tokenizer directory (SmolLM2's tokenizer.json) for vLLM and GuideLLM ----
TOK="$TMP/tokenizer"
mkdir -p "$TOK"
cp tests/data/smollm2-135m-tokenizer.json "$TOK/tokenizer.json"
cat >"$TOK/tokenizer_config.json" <<'EOF'
{"backend": "tokenizers", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
 "model_max_length": 1000000, "pad_token": "<|im_end|>",
 "tokenizer_class": "TokenizersBackend", "unk_token": "<|endoftext|>"}
EOF
echo '{"model_type": "llama"}' >"$TOK/config.json" # silences two ERROR lines in vLLM

# ---- tiktoken o200k_base for AIPerf's `--tokenizer builtin` (no network for tiktoken) ----
TIKTOKEN_DIR="$PEERS_DIR/tiktoken"
# sha1("https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken")
TIKFILE="$TIKTOKEN_DIR/fb374d419588a4632f3f557e76b4b70aebbca790"
if [[ " $TOOLS " == *" aiperf "* && ! -s "$TIKFILE" ]]; then
  echo "fetching o200k_base.tiktoken from the crate tiktoken-rs 0.12.1"
  P="$TMP/tiktoken-fetch"
  mkdir -p "$P/src" "$TIKTOKEN_DIR"
  printf '[package]\nname = "tiktoken-fetch"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\ntiktoken-rs = "=0.12.1"\n' >"$P/Cargo.toml"
  echo 'fn main() {}' >"$P/src/main.rs"
  (cd "$P" && cargo fetch --quiet)
  CRATE=$(cd "$P" && cargo metadata --format-version 1 | python3 -c \
    'import json,sys,os; print(next(os.path.dirname(p["manifest_path"]) for p in json.load(sys.stdin)["packages"] if p["name"]=="tiktoken-rs"))')
  cp "$CRATE/assets/o200k_base.tiktoken" "$TIKFILE"
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TIKTOKEN_CACHE_DIR="$TIKTOKEN_DIR"

# The sim's capacity must stay above the top level, or the server's own queue
# is what the tools measure: with 1 us per prefill token its mu is 4,535 req/s
# for this workload (`--explain`, printed below), rho 0.71 at 3,200 req/s. (At
# the sim's default 5 us it was 2,869 req/s: 3,200 req/s overloaded it.)
SIM_ARGS=(--port 0 --max-num-seqs 2048 --max-num-batched-tokens 65536 --kv-cache-tokens 8000000
  --step-base-ms 2 --decode-seq-us 2 --prefill-token-us 1)
MODEL=kneecap-sim
# GuideLLM and AIPerf are told to stop after CAP s (1.5 x the schedule's
# length): a tool that needs longer has delivered < 67% of the offered rate.
CAP=$((3 * SECS / 2))

start_sim() { # trace file
  $K sim "${SIM_ARGS[@]}" --trace "$1" 2>"$1.log" &
  SIM=$!
  for _ in $(seq 100); do grep -q "http://" "$1.log" && break; sleep 0.05; done
  URL=$(grep -o 'http://[0-9.:]*' "$1.log" | head -1)
}
stop_sim() { # SIGTERM flushes the trace (last line: a summary)
  kill "$SIM" 2>/dev/null || true
  wait "$SIM" 2>/dev/null || true
  SIM=""
}

# One tool's command for N requests at RATE req/s, writing its
# result under $OUT (prefix). Sets CMD (array).
tool_cmd() { # tool rate n out
  local tool=$1 rate=$2 n=$3 out=$4
  case $tool in
    kneecap | vllm | vllm-bench)
      # kneecap's command is vLLM's with `vllm` replaced by `kneecap`;
      # vllm-bench takes the same flags without `bench serve`.
      local bin=$K sub=(bench serve)
      [ "$tool" = vllm ] && bin="$PEERS_DIR/vllm/bin/vllm"
      [ "$tool" = vllm-bench ] && bin="$VLLM_BENCH_BIN" && sub=()
      CMD=("$bin" "${sub[@]}" --backend vllm --base-url "$URL" --model "$MODEL" --tokenizer "$TOK"
        --endpoint /v1/completions --dataset-name random --random-input-len 32 --random-output-len 64
        --ignore-eos --num-prompts "$n" --request-rate "$rate" --seed 0 --disable-tqdm
        --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99
        --save-result --result-dir "$(dirname "$out")" --result-filename "$(basename "$out").json") ;;
    guidellm)
      # ignore_eos is sent by GuideLLM itself when output_tokens is set; HTTP/2
      # is its default (over plain http httpx falls back to 1.1 anyway): off.
      local prof="kind=poisson,rate=$rate"
      CMD=("$PEERS_DIR/guidellm/bin/guidellm" run
        --backend "kind=openai_http,target=$URL,model=$MODEL,request_format=/v1/completions,http2=false"
        --profile "$prof" --constraint "kind=max_requests,count=$n"
        --constraint "kind=max_duration,seconds=$CAP"
        --data kind=synthetic_text,prompt_tokens=32,output_tokens=64
        --tokenizer "kind=hf_auto,model=$TOK" --output "kind=json,path=$out.json"
        --disable-console-interactive) ;;
    aiperf)
      CMD=("$PEERS_DIR/aiperf/bin/aiperf" profile --model "$MODEL" --url "$URL"
        --endpoint-type completions --streaming --request-rate "$rate" --arrival-pattern poisson
        --request-count "$n" --benchmark-duration "$CAP"
        --synthetic-input-tokens-mean 32 --synthetic-input-tokens-stddev 0
        --output-tokens-mean 64 --output-tokens-stddev 0 --extra-inputs ignore_eos:true
        --tokenizer builtin --random-seed 0 --ui-type none --no-server-metrics --no-gpu-telemetry
        --artifact-dir "$out.aiperf") ;;
  esac
}

# run tool rate n label: one run against a fresh sim; records a line in runs.tsv
run_one() {
  local tool=$1 rate=$2 n=$3 label=$4
  local base="$TMP/$label"
  start_sim "$base.trace.jsonl"
  tool_cmd "$tool" "$rate" "$n" "$base"
  printf '%q ' "${CMD[@]}" >"$base.cmd"
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  # A run still going after 2 x SECS + 90 s (start-up included) is cut; it is
  # then below 50% of the offered rate anyway.
  /usr/bin/time -f "%U %S %e" -o "$base.time" \
    timeout -k 10 $((2 * SECS + 90)) "${CMD[@]}" >"$base.out" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  stop_sim
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$tool" "$([ "$n" = 1 ] && echo startup || echo "$rate")" "$n" "$label" "$rc" "$(cat "$base.time" | tail -1)" >>"$TMP/runs.tsv"
  printf '  %-8s %5s req/s  %6d requests  rc %-3s  %s\n' "$tool" "$rate" "$n" "$rc" \
    "$(awk '{printf "user %.1f s, sys %.1f s, wall %.1f s", $1, $2, $3}' "$base.time" | tail -1)"
}

echo "== kneecap vs peers: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -sr)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "kneecap $($K --version | awk '{print $2}') ($(git rev-parse --short HEAD)); vllm-bench $VLLM_BENCH_BIN; vllm ${PIN[vllm]#*==}, guidellm ${PIN[guidellm]#*==}, aiperf ${PIN[aiperf]#*==}"
echo "sim: kneecap sim ${SIM_ARGS[*]:2}"
$K sim "${SIM_ARGS[@]:2}" --explain --input-len 32 --output-len 64 | sed 's/^/  /'
echo "levels: $RATES req/s x $SECS s; 32-token prompts, 64 output tokens (ignore_eos), streaming /v1/completions"
: >"$TMP/runs.tsv"

R0=${RATES%% *}
echo "== start-up cost: 1 request per tool (same command as the first level, N = 1)"
for tool in $TOOLS; do run_one "$tool" "$R0" 1 "$tool-startup"; done
for rate in $RATES; do
  n=$((rate * SECS))
  echo "== $rate req/s, $n requests"
  for tool in $TOOLS; do run_one "$tool" "$rate" "$n" "$tool-$rate"; done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "run time: $(($(date +%s) - T0)) s"
echo "== commands (URL and paths as run; first level)"
for tool in $TOOLS; do
  echo "$tool: $(cat "$TMP/$tool-$R0.cmd" | sed "s#$TMP#\$TMP#g; s#$PEERS_DIR#\$PEERS_DIR#g")"
done
python3 bench/peers_report.py "$TMP"
