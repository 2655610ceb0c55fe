#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite.
# Usage: scripts/test.sh [preset]   # default, asan, tsan or thread-safety
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
start=$SECONDS
scripts/setup.sh "$preset"
built=$SECONDS
ctest --preset "$preset" -j"$(nproc)"
echo "test.sh: $preset: build $((built - start)) s, tests $((SECONDS - built)) s" |
  tee -a "${STRATA_STAGE_TIMES:-/dev/null}"
