#!/usr/bin/env bash
# Benchmark: the highest streamed-token event rate kneecap sustains before its
# own self-check (dispatch lateness, achieved vs offered rate, CPU, runtime
# lag) fails. Open-loop Poisson ladder, 64-token outputs (one SSE event per
# token), against `kneecap sim` sized far above the load (2 ms + 2 us/seq
# steps). Both processes share the machine's cores, so the ladder also shows
# where the sim, not kneecap, runs out; the sim's step lag tells which.
# Prints, per level: achieved rate, events/s, kneecap CPU (user+sys) and
# events per kneecap CPU-second, and kneecap's generator verdict.
# Usage: bench/event_rate.sh [SECONDS_PER_LEVEL] [RATES...]  (default 10; 400 800 1600 3200)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-10}"; shift || true
RATES=("${@:-400 800 1600 3200}")
read -r -a RATES <<<"${RATES[*]}"
cargo build --release --quiet
K=target/release/kneecap
TMP=$(mktemp -d)
trap 'kill $SIM 2>/dev/null || true; rm -rf "$TMP"' EXIT
$K sim --port 0 --max-num-seqs 4096 --max-num-batched-tokens 65536 --kv-cache-tokens 8000000 \
  --step-base-ms 2 --decode-seq-us 2 --prefill-token-us 0.1 >/dev/null 2>"$TMP/sim.log" &
SIM=$!
for _ in $(seq 50); do grep -q "http://" "$TMP/sim.log" && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$TMP/sim.log" | head -1)
echo "sim at $URL; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-12s %-12s %-10s %-16s %s\n' offered achieved events/s "CPU %" "events/CPU-s" verdict
for RATE in "${RATES[@]}"; do
  N=$((RATE * SECS))
  /usr/bin/time -f "%U %S %e" -o "$TMP/time" $K run --base-url "$URL" --request-rate "$RATE" \
    --num-prompts "$N" --random-input-len 32 --random-output-len 64 --ignore-eos \
    --disable-tqdm >"$TMP/out" 2>&1 || true
  read -r user sys wall <"$TMP/time"
  achieved=$(grep -o "Request throughput (req/s): *[0-9.]*" "$TMP/out" | grep -o "[0-9.]*$")
  tokens=$(grep -o "Total generated tokens: *[0-9]*" "$TMP/out" | grep -o "[0-9]*$")
  dur=$(grep -o "Benchmark duration (s): *[0-9.]*" "$TMP/out" | grep -o "[0-9.]*$")
  verdict=$(grep -E "^Generator|^GENERATOR" "$TMP/out" | head -1 | cut -c1-110)
  python3 - "$RATE" "$achieved" "$tokens" "$dur" "$user" "$sys" "$verdict" <<'PY'
import sys
rate, ach, tok, dur, user, sys_, verdict = sys.argv[1:]
cpu = float(user) + float(sys_)
ev = int(tok) / float(dur)
print(f"{rate:<10} {float(ach):<12.1f} {ev:<12,.0f} {100 * cpu / float(dur):<10.0f} {int(tok) / cpu:<16,.0f} {verdict}")
PY
done
echo "sim step lag (seconds behind its step clock):"
curl -s "$URL/metrics" | grep -E "^kneecap_sim_step_lag_seconds_(count|sum)|le=\"0.001\"|le=\"0.01\"" || true
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
