#!/usr/bin/env bash
# Installs what strata needs on a fresh Debian 12 machine (skipping what is
# already there) and configures + builds it. Usage:
#   scripts/setup.sh [preset] [--compile-only]
#       preset: default (the default), asan, tsan, thread-safety (clang
#       -Wthread-safety) or fuzz (the libFuzzer targets, clang; see
#       scripts/fuzz.sh); --compile-only compiles every source file and
#       links nothing (the thread-safety analysis is the compile).
# The CUDA toolkit is used when present (/usr/local/cuda); it is not installed
# here. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-default}"
compile_only=""
[ "${2:-}" = "--compile-only" ] && compile_only=1

packages=(build-essential cmake ninja-build pkg-config
  libabsl-dev liburing-dev libboost-dev nlohmann-json3-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev fio clang-format
  libopenblas-dev zlib1g-dev dataset-fashion-mnist gnuplot-nox clang
  bible-kjv libsentencepiece-dev openmpi-bin libopenmpi-dev
  python3-dev python3-venv python3-torch python3-numpy python3-pytest
  python3-yaml python3-requests libdlpack-dev)
# The fuzz preset links clang's libFuzzer and sanitizer runtimes.
if [ "$preset" = fuzz ]; then packages+=(libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# nvcc is found through PATH or the standard toolkit location.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# The Python package (default preset): a venv on Debian's Python that sees
# Debian's torch and numpy, with the pinned PyPI packages added.
if [ "$preset" = default ]; then
  venv=build/venv
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r python/requirements.txt
fi
cmake --preset "$preset" >/dev/null
if [ -n "$compile_only" ]; then
  # Every source file, and nothing that links them; not the layering
  # check's cases, which must fail to compile (tests/layering). The C++
  # files go through the compiler's front end only (-fsyntax-only: clang's
  # -Wthread-safety is a front-end analysis, and code generation is a third
  # of a compile); CUDA files compile as usual.
  export dir="build/$preset"
  targets=$(ninja -C "$dir" -t targets all | grep -v '/CMakeFiles/layering_')
  mapfile -t cxx < <(sed -n 's/^\(.*\.o\): CXX_COMPILER.*/\1/p' <<<"$targets")
  mapfile -t other < <(sed -n '/: CXX_COMPILER/d; s/^\(.*\.o\): .*/\1/p' <<<"$targets")
  echo "setup: checking ${#cxx[@]} files, compiling ${#other[@]} (no links)"
  ninja -C "$dir" strata_build_info >/dev/null  # a generated source
  ((${#other[@]} == 0)) || ninja -C "$dir" -j"$(nproc)" "${other[@]}"
  printf '%s\n' "${cxx[@]}" | xargs -P "$(nproc)" -I{} bash -c \
    'cd "$dir" && c=$(ninja -t commands -s "$1") && eval "${c/ -o $1 / -fsyntax-only }"' \
    _ {}
else
  cmake --build --preset "$preset" -j"$(nproc)"
fi
