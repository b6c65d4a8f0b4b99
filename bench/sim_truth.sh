#!/usr/bin/env bash
# Benchmark: the simulator's true knee (`kneecap sim --explain --slo`) and the
# CPU time its virtual-time search takes, on the workloads of issue 14:
#   - the slot server (4 slots, 5 ms steps, no per-token cost; 16 in / 19 out
#     tokens = 95 ms service, mu = 42.1 req/s) at p99_ttft_ms<=300;
#   - tiny at 1024/128 and 128/64, and 7b-24gb at 1024/128, at p99_ttft_ms<=500.
# Prints one line per workload: the median knee, the seeds' min-max, and the
# user+system CPU seconds and wall seconds of the whole search (3 seeds x
# 20000 measured requests, run on up to 3 threads).
# Usage: bench/sim_truth.sh            (builds the release binary; ~1 minute)
#        KNEECAP=target/debug/kneecap bench/sim_truth.sh   (an existing build)
# Needs GNU time at /usr/bin/time (Debian: apt-get install -y time) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KNEECAP:-}" ]; then
  cargo build --release --quiet
  KNEECAP=target/release/kneecap
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SLOT="--max-num-seqs 4 --step-base-ms 5 --prefill-token-us 0 --decode-seq-us 0"
run() { # label, SLO, sim flags...
  local label=$1 slo=$2; shift 2
  /usr/bin/time -f "%U %S %e" -o "$TMP/time" \
    "$KNEECAP" sim --explain "$@" --slo "$slo" --json >"$TMP/out.json"
  python3 - "$label" "$slo" "$TMP/out.json" "$TMP/time" <<'PY'
import json, sys
label, slo, out, tm = sys.argv[1:]
v = json.load(open(out))
k = v["true_knee"]
user, sys_, wall = (float(x) for x in open(tm).read().split()[-3:])
print(f"{label:<22} {slo:<18} mu {v['mu_req_s']:7.2f}  knee {k['median_req_s']:7.2f} "
      f"({k['min_req_s']:.2f}-{k['max_req_s']:.2f})  cpu {user + sys_:5.1f} s  wall {wall:5.1f} s")
PY
}
run "slot server 16/19" 'p99_ttft_ms<=300' $SLOT --input-len 16 --output-len 19
run "slot server 16/19" 'p99_ttft_ms<=500' $SLOT --input-len 16 --output-len 19
run "tiny 1024/128" 'p99_ttft_ms<=500' --input-len 1024 --output-len 128
run "tiny 128/64" 'p99_ttft_ms<=500' --input-len 128 --output-len 64
run "7b-24gb 1024/128" 'p99_ttft_ms<=500' --preset 7b-24gb --input-len 1024 --output-len 128
run "tiny 1024/128" 'p99_tpot_ms<=20' --input-len 1024 --output-len 128
