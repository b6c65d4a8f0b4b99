#!/usr/bin/env bash
# Benchmark: how closely a timed_trace replay keeps the trace's timestamps,
# seen from the server. kneecap and `vllm bench serve` (the peer whose
# --self-timed flag kneecap's follows) replay the same trace against the
# built-in simulator, whose --trace records when each request arrived: the
# kernel's receive time of its last byte (`arrival_rx_s`), and when the sim's
# handler read it (`arrival_s`, the sim's own scheduling included).
# Drift = server arrival - trace timestamp, less the median of that (the two
# clocks differ by a constant): p50 / p99 / max in ms, from the kernel stamp
# (from the handler's read on the line below it).
# The trace is data/trace-sample.jsonl with its timestamps divided by SPEEDUP
# (default 4: 400 requests in about 36 s, 11 req/s on average, bursts to
# about 40 req/s), so both tools replay it as is (vLLM has no speed-up flag).
# Usage: bench/trace_replay.sh [SPEEDUP]   KNEECAP_BIN=path, VLLM=path (or VLLM=none)
set -euo pipefail
cd "$(dirname "$0")/.."
SPEEDUP="${1:-4}"
if [ -z "${KNEECAP_BIN:-}" ]; then
  CARGO_PROFILE_RELEASE_LTO=false cargo build --release --quiet
fi
K="${KNEECAP_BIN:-target/release/kneecap}"
VLLM="${VLLM:-/work/venv-vllm/bin/vllm}"
TMP=$(mktemp -d)
SIM=""
trap '[ -n "$SIM" ] && kill "$SIM" 2>/dev/null; rm -rf "$TMP"' EXIT

python3 - "$SPEEDUP" data/trace-sample.jsonl "$TMP/trace.jsonl" <<'PY'
import json, sys
speed, src, dst = float(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(src) as f, open(dst, "w") as g:
    for line in f:
        r = json.loads(line)
        r["timestamp"] = round(r["timestamp"] / speed, 6)
        g.write(json.dumps(r) + "\n")
PY

# A tokenizer directory for vLLM (it needs one; kneecap does not).
TOK="$TMP/tokenizer"
mkdir -p "$TOK"
cp tests/data/smollm2-135m-tokenizer.json "$TOK/tokenizer.json"
cat >"$TOK/tokenizer_config.json" <<'JSON'
{"backend": "tokenizers", "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
 "model_max_length": 1000000, "pad_token": "<|im_end|>",
 "tokenizer_class": "TokenizersBackend", "unk_token": "<|endoftext|>"}
JSON
echo '{"model_type": "llama"}' >"$TOK/config.json"

$K sim --port 0 --max-num-seqs 256 --kv-cache-tokens 4000000 --trace "$TMP/sim.jsonl" \
  >/dev/null 2>"$TMP/sim.log" &
SIM=$!
for _ in $(seq 50); do grep -q "://" "$TMP/sim.log" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$TMP/sim.log" | head -1)

COMMON=(--base-url "$URL" --model kneecap-sim --dataset-name timed_trace --dataset-path "$TMP/trace.jsonl"
  --self-timed --num-prompts 400 --disable-tqdm)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
$K bench serve "${COMMON[@]}" --request-id-prefix kc- --save-result --save-detailed \
  --result-filename "$TMP/kneecap.json" >"$TMP/kneecap.out" 2>&1 || { cat "$TMP/kneecap.out"; exit 1; }
if [ "$VLLM" != none ] && [ -x "$VLLM" ]; then
  HF_HUB_OFFLINE=1 "$VLLM" bench serve "${COMMON[@]}" --backend vllm --tokenizer "$TOK" \
    --request-id-prefix vl- >"$TMP/vllm.out" 2>&1 || { tail -20 "$TMP/vllm.out"; exit 1; }
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
kill "$SIM" && wait "$SIM" 2>/dev/null || true # the sim flushes its trace on exit
SIM=""

python3 - "$TMP/trace.jsonl" "$TMP/sim.jsonl" "$TMP/kneecap.json" <<'PY'
import json, sys
stamps = [json.loads(l)["timestamp"] for l in open(sys.argv[1])]
arrivals, handler = {}, {}
for line in open(sys.argv[2]):
    v = json.loads(line)
    rid = v.get("request_id", "")
    if "-" in rid and v.get("arrival_s") is not None:
        rx = v.get("arrival_rx_s")
        arrivals[rid] = v["arrival_s"] if rx is None else rx
        handler[rid] = v["arrival_s"]
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]
def drift(at, prefix):
    off = [(at[f"{prefix}{i}"] - t) * 1e3 for i, t in enumerate(stamps) if f"{prefix}{i}" in at]
    mid = q(off, .5) if off else 0
    return [abs(o - mid) for o in off]
for name, prefix in (("kneecap", "kc-"), ("vllm bench serve", "vl-")):
    d = drift(arrivals, prefix)
    if not d:
        print(f"{name:17}: no requests matched in the sim trace")
        continue
    print(f"{name:17}: n={len(d)} drift p50 {q(d, .5):.3f} ms, p99 {q(d, .99):.3f} ms, max {max(d):.3f} ms")
    h = drift(handler, prefix)
    print(f"{'':17}  (to the sim's handler read: p50 {q(h, .5):.3f} ms, p99 {q(h, .99):.3f} ms, max {max(h):.3f} ms)")
# kneecap's drift in two parts: its own dispatch lateness (sent - due, on its
# clock) and the way to the server (server arrival - sent, less its median).
k = json.load(open(sys.argv[3]))
sent, due = k["start_times"], k["kneecap"]["due_times"]
late = [(s - d) * 1e3 for s, d in zip(sent, due)]
way = [(arrivals[f"kc-{i}"] - s) * 1e3 for i, s in enumerate(sent) if f"kc-{i}" in arrivals]
mid = q(way, .5)
way = [abs(w - mid) for w in way]
pick = [x * 1e3 for x in k["queue_times"]]
rel = [l - p for l, p in zip(late, pick)]
print(f"  kneecap, sent - due            : p50 {q(late, .5):.3f} ms, p99 {q(late, .99):.3f} ms, max {max(late):.3f} ms")
print(f"    released - due (its thread)  : p50 {q(rel, .5):.3f} ms, p99 {q(rel, .99):.3f} ms, max {max(rel):.3f} ms")
print(f"    sent - released (runtime)    : p50 {q(pick, .5):.3f} ms, p99 {q(pick, .99):.3f} ms, max {max(pick):.3f} ms")
print(f"  kneecap, arrival - sent (±med) : p50 {q(way, .5):.3f} ms, p99 {q(way, .99):.3f} ms, max {max(way):.3f} ms")
PY
