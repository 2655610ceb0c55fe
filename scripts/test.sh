#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite.
# Usage: scripts/test.sh [preset]   # default, asan, tsan or thread-safety
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
scripts/setup.sh "$preset"
ctest --preset "$preset" -j"$(nproc)"
