#!/usr/bin/env bash
# Benchmark: what kneecap adds to TTFT, and what a stream costs in memory.
# 1. Client-added TTFT at N concurrent streams: client TTFT minus the
#    simulator's own TTFT for the same request (its --trace: first token
#    handed to the connection minus request received), p50/p99.
# 2. Peak RSS of the kneecap process with 1 and with N streams in flight;
#    (difference) / (N - 1) is the memory per in-flight stream.
# Usage: bench/client_overhead.sh [STREAMS]   (default 1000)
# Needs GNU time at /usr/bin/time (Debian: apt-get install -y time) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
cargo build --release --quiet
K=target/release/kneecap
TMP=$(mktemp -d)
trap 'kill $SIM 2>/dev/null || true; rm -rf "$TMP"' EXIT
$K sim --port 0 --trace "$TMP/trace.jsonl" --max-num-seqs 4096 --max-num-batched-tokens 65536 \
  --kv-cache-tokens 4000000 --step-base-ms 5 --prefill-token-us 0.1 --decode-seq-us 1 2>"$TMP/sim.log" &
SIM=$!
for _ in $(seq 50); do grep -q "http://" "$TMP/sim.log" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$TMP/sim.log" | head -1)
run() { # streams prefix
  /usr/bin/time -f "%M" -o "$TMP/rss-$2" $K run --base-url "$URL" --max-concurrency "$1" \
    --num-prompts $(( $1 * 3 )) --random-input-len 32 --random-output-len 200 --disable-tqdm \
    --request-id-prefix "$2-" --save-result --save-detailed --result-filename "$TMP/$2.json" >/dev/null 2>&1
}
run 1 one
run "$N" many
kill -INT $SIM; wait $SIM 2>/dev/null || true
python3 - "$TMP" "$N" <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
res = json.load(open(f"{tmp}/many.json"))
diffs = []
for line in open(f"{tmp}/trace.jsonl"):
    v = json.loads(line)
    rid = v.get("request_id", "")
    if not rid.startswith("many-") or v.get("first_token_s") is None:
        continue
    i = int(rid[5:])
    diffs.append((res["ttfts"][i] - (v["first_token_s"] - v["arrival_s"])) * 1e3)
diffs.sort()
q = lambda p: diffs[min(len(diffs) - 1, int(p * (len(diffs) - 1)))]
print(f"{n} concurrent streams, {len(diffs)} requests: client-added TTFT p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms, max {diffs[-1]:.3f} ms")
one = int(open(f"{tmp}/rss-one").read()); many = int(open(f"{tmp}/rss-many").read())
print(f"peak RSS: 1 stream {one/1024:.1f} MiB, {n} streams {many/1024:.1f} MiB -> {(many-one)/(n-1):.1f} KiB per in-flight stream")
print(f"(the {n}-stream run kept per-request detail for {3*n} requests: --save-detailed)")
PY
