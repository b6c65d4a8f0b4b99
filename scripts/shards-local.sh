#!/usr/bin/env bash
# Run one load as N shard processes on this machine with a common --start-at,
# then merge their results exactly: the local equivalent of the Kubernetes
# Indexed Job in deploy/kubernetes/.
#
#   scripts/shards-local.sh N -- run   --base-url http://127.0.0.1:8000 --request-rate 40 --num-prompts 2000
#   scripts/shards-local.sh N -- sweep --base-url http://127.0.0.1:8000 --rates 10,20,40 --slo 'p99_ttft_ms<=500'
#
# Environment: KNEECAP (binary, default `kneecap`), SHARDS_DIR (default
# ./shards), START_DELAY (seconds until the common start, default 5).
# Exit status: that of `kneecap merge` (0 ok, 1 SLO failed, 2 invalid/error).
set -euo pipefail

usage() { echo "usage: $0 N -- run|sweep <kneecap args>" >&2; exit 2; }
[[ $# -ge 3 ]] || usage
n="$1"; shift
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "$0: N must be a positive integer, got '$n'" >&2; exit 2; }
[[ "$1" == "--" ]] || usage
shift
cmd="$1"; shift
[[ "$cmd" == run || "$cmd" == sweep ]] || { echo "$0: the command must be run or sweep, got '$cmd'" >&2; exit 2; }

kneecap="${KNEECAP:-kneecap}"
dir="${SHARDS_DIR:-./shards}"
delay="${START_DELAY:-5}"
mkdir -p "$dir"
rm -f "$dir"/shard-*.json "$dir"/merged.json
start_at=$(( $(date +%s) + delay ))

pids=()
for (( i = 0; i < n; i++ )); do
  if [[ "$cmd" == run ]]; then
    out=(--save-result --result-dir "$dir" --result-filename "shard-$i.json")
  else
    out=(-o "$dir/shard-$i.json")
  fi
  "$kneecap" "$cmd" "$@" --shard "$i/$n" --start-at "$start_at" "${out[@]}" \
    >"$dir/shard-$i.log" 2>&1 &
  pids+=($!)
done

failed=0
for (( i = 0; i < n; i++ )); do
  status=0
  wait "${pids[$i]}" || status=$?
  if [[ $status -ge 2 ]]; then
    echo "$0: shard $i/$n exited with status $status (see $dir/shard-$i.log)" >&2
    failed=1
  fi
done
[[ $failed -eq 0 ]] || echo "$0: merging what is there; a missing shard makes the merge invalid" >&2

shopt -s nullglob
files=("$dir"/shard-*.json)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "$0: no shard wrote a result in $dir" >&2
  exit 2
fi
exec "$kneecap" merge "${files[@]}" -o "$dir/merged.json"
