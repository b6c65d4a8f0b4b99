#!/usr/bin/env bash
# Benchmark: what TLS adds to kneecap's client-added TTFT.
# Client-added TTFT is kneecap's TTFT minus the simulator's own TTFT for the
# same request (its --trace: request received -> first token handed to the
# connection). Measured at 150 req/s (Poisson), 64-token outputs, against two
# simulators with the same parameters, one plain http and one https (a
# throwaway CA and certificate made here with openssl, passed as --ca-cert).
# The plain and TLS runs alternate, ROUNDS times each, so drift in machine
# load hits both alike; the figures pool each side's requests.
# Usage: bench/tls.sh [REQUESTS_PER_RUN] [ROUNDS]   (default 3000 x 2: ~90 s)
# KNEECAP_BIN=path uses that binary instead of building the release one.
# Needs openssl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
REQS="${1:-3000}"
ROUNDS="${2:-2}"
if [ -z "${KNEECAP_BIN:-}" ]; then
  CARGO_PROFILE_RELEASE_LTO=false cargo build --release --quiet
fi
K="${KNEECAP_BIN:-target/release/kneecap}"
TMP=$(mktemp -d)
SIMS=()
trap 'kill "${SIMS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=bench CA" -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$TMP/server.key" -out "$TMP/server.csr" 2>/dev/null
printf "subjectAltName=IP:127.0.0.1\n" >"$TMP/san.ext"
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -CAcreateserial \
  -days 2 -extfile "$TMP/san.ext" -out "$TMP/server.pem" 2>/dev/null

start_sim() { # name, sim flags...; sets URL
  local name=$1; shift
  $K sim --port 0 --max-num-seqs 1024 --kv-cache-tokens 2000000 --trace "$TMP/$name.jsonl" "$@" \
    >/dev/null 2>"$TMP/$name.log" &
  SIMS+=($!)
  for _ in $(seq 50); do grep -q "://" "$TMP/$name.log" && break; sleep 0.1; done
  URL=$(grep -o 'https\?://[0-9.:]*' "$TMP/$name.log" | head -1)
}
start_sim plain; PLAIN=$URL
start_sim tls --tls-cert "$TMP/server.pem" --tls-key "$TMP/server.key"; TLS=$URL
echo "plain sim $PLAIN, TLS sim $TLS; $ROUNDS rounds of $REQS requests at 150 req/s each"

for r in $(seq "$ROUNDS"); do
  for side in plain tls; do
    url=$PLAIN; extra=()
    if [ "$side" = tls ]; then url=$TLS; extra=(--ca-cert "$TMP/ca.pem"); fi
    $K run --disable-tqdm --base-url "$url" "${extra[@]}" --request-rate 150 --num-prompts "$REQS" \
      --random-input-len 128 --random-output-len 64 --seed "$r" --request-id-prefix "$side$r-" \
      --save-result --save-detailed --result-filename "$TMP/$side$r.json" >"$TMP/out-$side$r" 2>&1 \
      || { cat "$TMP/out-$side$r"; exit 1; }
    grep -q "Successful requests: *$REQS" "$TMP/out-$side$r" || { echo "$side round $r incomplete"; cat "$TMP/out-$side$r"; }
  done
done

python3 - "$TMP" "$ROUNDS" <<'PY'
import json, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]
p50 = {}
for side in ("plain", "tls"):
    server = {}
    for line in open(f"{tmp}/{side}.jsonl"):
        v = json.loads(line)
        rid = v.get("request_id", "")
        if v.get("first_token_s") is not None and "-" in rid:
            server[rid] = v["first_token_s"] - v["arrival_s"]
    d = []
    for r in range(1, rounds + 1):
        res = json.load(open(f"{tmp}/{side}{r}.json"))
        for i, t in enumerate(res["ttfts"]):
            s = server.get(f"{side}{r}-{i}")
            if t and s is not None:
                d.append((t - s) * 1e3)
    p50[side] = q(d, .5)
    print(f"{side:5} client-added TTFT: n={len(d)} p50 {q(d, .5):.3f} ms, p99 {q(d, .99):.3f} ms, max {max(d):.3f} ms")
print(f"TLS minus plain at p50: {p50['tls'] - p50['plain']:+.3f} ms (target <= 0.2 ms)")
PY
