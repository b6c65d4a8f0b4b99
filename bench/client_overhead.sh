#!/usr/bin/env bash
# Benchmark: what kneecap adds to TTFT, and what it costs in memory.
# 1. Client-added TTFT at N concurrent streams: the client's TTFT minus the
#    simulator's own TTFT for the same request (its --trace: first token
#    handed to the connection minus the kernel's receive time of the
#    request's last byte, `arrival_rx_s`; the handler's `arrival_s` where the
#    sim had no kernel stamp), p50/p99, for all requests and for those after
#    the first wave (connections already open). Also the sim's own wait
#    (handler read minus kernel receive): server time that a handler-stamped
#    trace would have charged to the client.
#    The sim runs 20 ms + 20 us per sequence steps: 40 ms at 1,000 streams,
#    i.e. 25,000 token events/s, a large GPU's decode rate at that batch.
# 2. Peak RSS with 1 and with N streams in flight (no per-request detail
#    kept): (difference) / (N - 1) is the memory per in-flight stream.
# 3. Peak RSS over runs of growing length (open loop, 4-token outputs):
#    flat or not, and the bytes each finished request keeps.
# Usage: bench/client_overhead.sh [STREAMS]   (default 1000; ~2 minutes)
# Needs GNU time at /usr/bin/time (Debian: apt-get install -y time) and python3.
# KNEECAP=path: use that binary instead of building target/release/kneecap.
# KNEECAP_UI=dashboard: run part 1 with the live dashboard on a pseudo-terminal
# (util-linux `script`), to measure what the dashboard costs.
# KNEECAP_UI=plain-tty: the same pseudo-terminal with `--ui plain` (the
# control for the dashboard: both pay for the terminal relay).
# ONLY_TTFT=1: part 1 only.
# OPEN_RATE=3200: part 1 as an open loop at that rate (Poisson, 12 s, 64
# output tokens with ignore_eos) instead of N closed-loop streams; part 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
if [ -z "${KNEECAP:-}" ]; then cargo build --release --quiet; fi
K="${KNEECAP:-target/release/kneecap}"
echo "ui ${KNEECAP_UI:-plain}, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
TMP=$(mktemp -d)
SIMS=()
trap 'kill "${SIMS[@]}" 2>/dev/null || true; rm -rf "$TMP"' EXIT
start_sim() { # name, sim flags...; sets URL
  local name=$1; shift
  $K sim --port 0 --max-num-seqs 4096 --max-num-batched-tokens 65536 --kv-cache-tokens 8000000 \
    --prefill-token-us 0.1 "$@" >/dev/null 2>"$TMP/$name.log" &
  SIMS+=($!)
  for _ in $(seq 50); do grep -q "http://" "$TMP/$name.log" && break; sleep 0.1; done
  URL=$(grep -o 'http://[0-9.:]*' "$TMP/$name.log" | head -1)
}
rss_run() { # label, kneecap run args...
  local label=$1; shift
  if [ "${KNEECAP_UI:-}" = dashboard ] || [ "${KNEECAP_UI:-}" = plain-tty ]; then
    /usr/bin/time -f "%M" -o "$TMP/rss-$label" script -q -e \
      -c "stty cols 120 rows 40; $K run --disable-tqdm --ui ${KNEECAP_UI%-tty} $*" /dev/null >"$TMP/out-$label" 2>&1
    tr -d '\r' <"$TMP/out-$label" >"$TMP/out-$label.txt" && mv "$TMP/out-$label.txt" "$TMP/out-$label"
  else
    /usr/bin/time -f "%M" -o "$TMP/rss-$label" $K run --disable-tqdm "$@" >"$TMP/out-$label" 2>&1
  fi
}

if [ -n "${OPEN_RATE:-}" ]; then
  # Open loop: OPEN_RATE req/s (Poisson) for 12 s against the sim with
  # bench/peers.sh's step costs; "the first wave" is the first second.
  echo "== 1. client-added TTFT at $OPEN_RATE req/s (open loop, 12 s)"
  start_sim ttft --trace "$TMP/trace.jsonl" --step-base-ms 2 --decode-seq-us 2
  LOAD=(--request-rate "$OPEN_RATE" --num-prompts $((OPEN_RATE * 12)) --ignore-eos)
  N=$OPEN_RATE
else
  echo "== 1. client-added TTFT at $N concurrent streams"
  start_sim ttft --trace "$TMP/trace.jsonl" --step-base-ms 20 --decode-seq-us 20
  LOAD=(--max-concurrency "$N" --num-prompts $((N * 4)))
fi
rss_run many --base-url "$URL" "${LOAD[@]}" \
  --random-input-len 32 --random-output-len 64 --request-id-prefix "many-" \
  --save-result --save-detailed --result-filename "$TMP/many.json"
grep -E "Output token throughput|Median TTFT \(|P99 TTFT \(" "$TMP/out-many"
python3 - "$TMP" "$N" <<'PY'
import json, sys
tmp, n = sys.argv[1], int(sys.argv[2])
res = json.load(open(f"{tmp}/many.json"))
def arrival(v):
    """The server-side arrival: the kernel's receive stamp where the sim had one."""
    rx = v.get("arrival_rx_s")
    return v["arrival_s"] if rx is None else rx
server = {}
for line in open(f"{tmp}/trace.jsonl"):
    v = json.loads(line)
    rid = v.get("request_id", "")
    if rid.startswith("many-") and v.get("first_token_s") is not None:
        server[int(rid[5:])] = v["first_token_s"] - arrival(v)
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]
waits, rx_n = [], 0
for line in open(f"{tmp}/trace.jsonl"):
    v = json.loads(line)
    if v.get("request_id", "").startswith("many-"):
        if v.get("arrival_rx_s") is not None:
            rx_n += 1
            waits.append((v["arrival_s"] - v["arrival_rx_s"]) * 1e3)
if waits:
    print(f"sim arrivals kernel-stamped: {rx_n}; the sim's own wait (handler read - kernel receive): p50 {q(waits, .5):.3f} ms, p99 {q(waits, .99):.3f} ms")
rx = res["kneecap"].get("rx_timestamps", {})
print(f"receive stamps: {rx.get('source', 'task')} ({rx.get('kernel_stamped', 0)} kernel, {rx.get('task_stamped', 0)} task)")
delays = res["kneecap"].get("first_token_delays") or [None] * len(res["ttfts"])
for name, keep in (("all requests", lambda i: True), (f"after the first {n} (connections open)", lambda i: i >= n)):
    d = [(res["ttfts"][i] - s) * 1e3 for i, s in server.items() if keep(i) and res["ttfts"][i]]
    print(f"client-added TTFT, {name}: n={len(d)} p50 {q(d, .5):.3f} ms, p99 {q(d, .99):.3f} ms, max {max(d):.3f} ms")
    d = [(res["ttfts"][i] + (delays[i] or 0) - s) * 1e3 for i, s in server.items() if keep(i) and res["ttfts"][i]]
    print(f"  the same from task stamps (kernel + scheduling delay): p50 {q(d, .5):.3f} ms, p99 {q(d, .99):.3f} ms")
# The split needs the two clocks aligned: take the fastest request of each
# path as zero (a lower bound on each path's added time).
st, arr, ft = res["start_times"], {}, {}
for line in open(f"{tmp}/trace.jsonl"):
    v = json.loads(line)
    rid = v.get("request_id", "")
    if rid.startswith("many-") and v.get("first_token_s") is not None:
        arr[int(rid[5:])], ft[int(rid[5:])] = arrival(v), v["first_token_s"]
later = [i for i in arr if i >= n and res["ttfts"][i]]
req = [arr[i] - st[i] for i in later]
resp = [st[i] + res["ttfts"][i] - ft[i] for i in later]
req0, resp0 = min(req), min(resp)
for name, xs, x0 in (("request path (sent -> sim's kernel received)", req, req0), ("response path (sim wrote -> client read)", resp, resp0)):
    d = [(x - x0) * 1e3 for x in xs]
    print(f"  {name}, above its fastest request: p50 {q(d, .5):.3f} ms, p99 {q(d, .99):.3f} ms")
PY
kill "${SIMS[@]}" 2>/dev/null || true; SIMS=()
if [ -n "${ONLY_TTFT:-}${OPEN_RATE:-}" ]; then exit 0; fi

echo "== 2. memory per in-flight stream"
start_sim mem --step-base-ms 50 --decode-seq-us 1
rss_run one --base-url "$URL" --max-concurrency 1 --num-prompts 1 --random-input-len 32 --random-output-len 100
rss_run n --base-url "$URL" --max-concurrency "$N" --num-prompts "$N" --random-input-len 32 --random-output-len 100
one=$(cat "$TMP/rss-one"); many=$(cat "$TMP/rss-n")
grep -q "Successful requests: *$N" "$TMP/out-n" || { echo "the $N-stream run did not complete"; cat "$TMP/out-n"; }
python3 -c "print(f'peak RSS: 1 stream {$one/1024:.1f} MiB, $N streams {$many/1024:.1f} MiB -> {($many-$one)/($N-1):.1f} KiB per in-flight stream')"
kill "${SIMS[@]}" 2>/dev/null || true; SIMS=()

echo "== 3. RSS over a long run (5,000 req/s, 4-token outputs)"
start_sim long --step-base-ms 0.5 --decode-seq-us 1
for REQS in 10000 50000 150000; do
  rss_run "long$REQS" --base-url "$URL" --request-rate 5000 --num-prompts "$REQS" \
    --random-input-len 16 --random-output-len 4
  ok=$(grep -o "Successful requests: *[0-9]*" "$TMP/out-long$REQS" | grep -o "[0-9]*$")
  echo "$REQS requests ($ok ok): peak RSS $(( $(cat "$TMP/rss-long$REQS") / 1024 )) MiB"
done
python3 - "$TMP" <<'PY'
import sys
tmp = sys.argv[1]
a, b = int(open(f"{tmp}/rss-long10000").read()), int(open(f"{tmp}/rss-long150000").read())
print(f"growth: {(b - a) * 1024 / 140000:.0f} bytes per finished request (10k -> 150k requests)")
PY
