#!/usr/bin/env bash
# A longer fuzz run of the SSE decoder and the OpenAI chunk parser: the
# property tests of tests/it/proto_props.rs (arbitrary bytes, arbitrary splits;
# no panics, split-invariant decoding) with many more cases than CI runs.
# Usage: scripts/fuzz.sh [CASES]   (default 100000; about a minute in release)
set -euo pipefail
cd "$(dirname "$0")/.."
KNEECAP_FUZZ_CASES="${1:-100000}" cargo test --release --test it proto_props:: 2>&1 | grep -E "^test |test result"
