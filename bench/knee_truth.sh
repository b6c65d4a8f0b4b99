#!/usr/bin/env bash
# Benchmark: does the sweep's knee interval contain the true knee?
#
# For three workloads on the built-in simulator (the `tiny` preset at
# 1024/128 and 128/64 tokens, the `7b-24gb` preset at 1024/128), compute the
# simulator's true knee for the SLO by running its own model in virtual time
# (`kneecap sim --explain --slo`, a simulation), then run `kneecap sweep`
# against the simulator (real time, real HTTP) and check
# last_pass <= true knee <= first_fail.
#
# Usage: bench/knee_truth.sh [SLO]        (default p99_ttft_ms<=500)
# Prints one line per workload: truth, bracket, confidences, wall time, steps.
# KT_KEEP=DIR keeps each sweep's JSON and stderr there.
# KT_WORKLOADS="preset in out; ..." picks workloads (default the three above).
# KT_SWEEP_FLAGS="..." adds flags to every sweep (e.g. "--calibrate-budget 60s
# --step-max-duration 300s" for a slow server such as 7b-24gb).
set -euo pipefail
cd "$(dirname "$0")/.."
SLO="${1:-p99_ttft_ms<=500}"
cargo build --release --quiet
TD="${CARGO_TARGET_DIR:-target}"
K="$TD/release/kneecap"
if [ -n "${KT_KEEP:-}" ]; then
  TMP=$(mkdir -p "$KT_KEEP" && cd "$KT_KEEP" && pwd)
else
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi

echo "| workload | true knee (virtual time) | sweep bracket | contains truth | confidence pass / fail | wall s | steps |"
echo "|---|---|---|---|---|---|---|"
IFS=';' read -ra WORKLOADS <<<"${KT_WORKLOADS:-tiny 1024 128; tiny 128 64; 7b-24gb 1024 128}"
for w in "${WORKLOADS[@]}"; do
  set -- $w
  preset=$1 in=$2 out=$3
  truth=$("$K" sim --explain --slo "$SLO" --preset "$preset" --input-len "$in" --output-len "$out" |
    grep -o 'true knee[^:]*: *[0-9.]*' | grep -o '[0-9.]*$' | head -1)
  t0=$(date +%s.%N)
  "$K" sweep --sim-preset "$preset" --random-input-len "$in" --random-output-len "$out" --ignore-eos \
    --calibrate --adaptive --slo "$SLO" ${KT_SWEEP_FLAGS:-} -o "$TMP/sweep.json" > /dev/null 2> "$TMP/err" || true
  cp "$TMP/sweep.json" "$TMP/sweep-$preset-$in-$out.json" 2>/dev/null || true
  cp "$TMP/err" "$TMP/sweep-$preset-$in-$out.err" 2>/dev/null || true
  wall=$(echo "$(date +%s.%N) - $t0" | bc)
  python3 - "$TMP/sweep.json" "$truth" "$preset $in/$out" "$wall" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
truth, name, wall = float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
k = d["knee"]
p, f = k.get("last_pass"), k.get("first_fail")
inside = p is not None and f is not None and p <= truth <= f
pc, fc = k.get("last_pass_confidence"), k.get("first_fail_confidence")
fmt = lambda x: "—" if x is None else f"{x:.2f}"
noise = " (pass end within noise)" if k.get("last_pass_within_noise") else ""
pooled = f" (pass end pooled over {len(k['last_pass_pooled'])} steps)" if k.get("last_pass_pooled") else ""
print(f"| {name} | {truth:.2f} req/s | {fmt(p)} – {fmt(f)}{noise}{pooled} | {'yes' if inside else 'NO'} | "
      f"{fmt(pc)} / {fmt(fc)} | {wall:.0f} | {len(d['steps'])} |")
EOF
done
