#!/usr/bin/env bash
# The twin's held-out accuracy on the real vLLM engine: bench/twin_vllm.py
# (see its header) with a release build. It starts its own vLLM servers
# (scripts/vllm-server.sh; the first build takes minutes) and runs about
# 30 minutes per configuration on a 2-core machine: keep the machine quiet.
#
# usage: bench/twin_vllm.sh OUT_DIR [default] [small]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/twin_vllm.sh OUT_DIR [default] [small]" >&2; exit 2; }
cargo build --release --quiet
exec python3 bench/twin_vllm.py "$@"
