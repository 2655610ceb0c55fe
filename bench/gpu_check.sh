#!/usr/bin/env bash
# gpu_check.sh: everything strata checks on a real GPU, in one run of a few
# minutes: the GPU tests (NCCL's transport, one rank, among them), `strata
# info` on the CUDA backend, the device link
# bandwidth (raw cudaMemcpyAsync vs through the store), unified memory (a 4 GiB
# managed buffer moved by faults, prefetch, batched and discarding prefetch,
# vs a pinned copy; the store's unified mode), the training kernels (the
# MLP's and the transformer's) against their CPU versions, the host Adam's
# vector paths against the scalar reference (the GPU host usually has
# AVX-512, which the build machine may lack) and cpu_adam_bench on its
# cores, and short `strata train` runs of the MLP (offloaded, in unified
# memory, resident; fp32, bf16, fp16; the streamed host optimizer) and of the GPT (offloaded, resident;
# fp32, bf16), whose losses must be bitwise equal. Prints a short table last.
#
#   bench/gpu_check.sh                 # build with the default preset, then run
#   bench/gpu_check.sh --prebuilt DIR[.tar.gz]  # run binaries packed by
#                                      # --pack (a GPU machine without the build
#                                      # dependencies)
#   bench/gpu_check.sh --pack DIR      # build here and pack the binaries, their
#                                      # non-system shared libraries and the
#                                      # corpus into DIR and DIR.tar.gz
# Results also go to $OUT (or ./gpu_check_out) as JSON and logs.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$out"
build_dir="${STRATA_BUILD_DIR:-build/default}"  # where --pack takes binaries from
# The test suites are one binary per source folder (tests/CMakeLists.txt);
# each step below picks its tests by gtest filter.
bins=(apps/strata tests/tiers_tests tests/store_tests tests/compute_tests
      tests/comm_tests bench/device_link_bench bench/train_bench
      bench/cpu_adam_bench)

build() {
  scripts/setup.sh default >/dev/null || { echo "gpu_check: build failed"; exit 1; }
}

pack() {  # pack DIR: binaries + the shared libraries a bare machine may lack
  local dir="$1"
  [ -n "${STRATA_BUILD_DIR:-}" ] || build
  rm -rf "$dir"; mkdir -p "$dir/bin" "$dir/lib"
  for b in "${bins[@]}"; do cp "$build_dir/$b" "$dir/bin/"; done
  strip --strip-debug "$dir"/bin/*  # the device tool carries 64 MiB at most
  for b in "$dir"/bin/*; do
    ldd "$b" | awk '/=> \//{print $3}' |
      grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
      grep -vE '/libcublas(Lt)?\.so' |  # 600 MB: the GPU machine's CUDA has them
      xargs -r -I{} cp -Ln {} "$dir/lib/" 2>/dev/null
  done
  # The Python package: the extension (stripped) and the .py files.
  if [ -d "$build_dir/python/strata" ]; then
    cp -rL "$build_dir/python" "$dir/python"
    rm -rf "$dir"/python/strata/__pycache__ "$dir"/python/strata/torch/__pycache__
    strip --strip-debug "$dir"/python/strata/_core*.so
    ldd "$dir"/python/strata/_core*.so | awk '/=> \//{print $3}' |
      grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
      xargs -r -I{} cp -Ln {} "$dir/lib/" 2>/dev/null
  fi
  # The GPT's corpus: the GPU machine lacks the bible-kjv package.
  mkdir -p "$dir/data"
  bible -f gen1:1-rev22:21 | sed -E 's/^[^ ]+ //' >"$dir/data/kjv.txt"
  # One compressed file to carry (the device tool takes 64 MiB; OpenBLAS
  # alone is 36 MB, 23 MB for everything compressed).
  tar czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
  echo "$dir.tar.gz: $(du -h "$dir.tar.gz" | cut -f1)"
  echo "packed $(ls "$dir/bin" | wc -l) binaries and $(ls "$dir/lib" | wc -l) libraries into $dir"
}

case "${1:-}" in
  --pack) pack "${2:?--pack DIR}"; exit 0 ;;
  --prebuilt)
    pre="${2:?--prebuilt DIR or DIR.tar.gz}"
    if [[ "$pre" == *.tar.gz ]]; then
      mkdir -p "$out/prebuilt" && tar xzf "$pre" -C "$out/prebuilt" &&
        pre="$out/prebuilt/$(basename "$pre" .tar.gz)"
    fi
    set -- "$1" "$pre"
    bindir="$2/bin"
    pydir="$2/python"
    corpus_flag="--corpus=${2}/data/kjv.txt"
    export LD_LIBRARY_PATH="${2}/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  "") build; bindir=""; pydir="build/default/python"; corpus_flag="" ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
esac
bin() { if [ -n "$bindir" ]; then echo "$bindir/$(basename "$1")"; else echo "build/default/$1"; fi; }

declare -A result
run_step() {  # run_step NAME CMD...: runs, logs, records pass/fail
  local name="$1"; shift
  echo "== $name: $*"
  local start=$SECONDS
  if timeout 300 "$@" >"$out/$name.log" 2>&1; then
    result[$name]="ok ($((SECONDS - start)) s)"
  else
    result[$name]="FAILED rc=$? ($((SECONDS - start)) s)"
  fi
  tail -n 15 "$out/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv,noheader \
  >"$out/gpu.txt" 2>&1 || echo "no nvidia-smi" >"$out/gpu.txt"
echo "GPU: $(cat "$out/gpu.txt")"
export STRATA_DEVICE=cuda
nvme_dir=$(mktemp -d /var/tmp/strata-gpu-check.XXXXXX)
trap 'rm -rf "$nvme_dir"' EXIT
run_step cuda_device_test "$(bin tests/tiers_tests)" --gtest_filter='CudaDeviceTest.*'
run_step store_gpu_test "$(bin tests/store_tests)" --gtest_filter='StoreGpuTest.*'
run_step unified_gpu_test "$(bin tests/store_tests)" --gtest_filter='UnifiedGpuTest.*'
run_step device_backend_test "$(bin tests/tiers_tests)" --gtest_filter='DeviceBackendTest.*'
run_step host_arena_test "$(bin tests/tiers_tests)" --gtest_filter='HostArenaTest.*'
# Eviction waits for the kernels of a copy's last lease (CUDA events).
run_step device_reader_wait_test "$(bin tests/store_tests)" \
  --gtest_filter='DeviceReaderWaitTest.*'
# A device acquire from the host copy queues its copy and returns; the
# lease's stream waits for it (CUDA events behind the gate).
run_step stream_ordered_acquire_test "$(bin tests/store_tests)" \
  --gtest_filter='StreamOrderedAcquireTest.*'
run_step info "$(bin apps/strata)" info --device=cuda --nvme-dir="$nvme_dir" \
  --host-budget=2GiB --json="$out/info.json"
run_step link_bench "$(bin bench/device_link_bench)" --size_mib=512 --samples=5 \
  --json="$out/link.json"
# NCCL (loaded at run time): the toolkit's, or the nvidia-nccl wheel's. One
# GPU takes one rank: the all-gather and its stream order, not a peer.
nccl_lib=$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null)
run_step nccl_gpu_test env \
  LD_LIBRARY_PATH="${nccl_lib:+$nccl_lib:}/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  "$(bin tests/comm_tests)" --gtest_filter='NcclCollectivesTest.*:NcclGpuTest.*'
# strata.torch: the pytest suite on CUDA tensors (the example's KJV run is
# the build machine's test), if this Python can load the extension.
if PYTHONPATH="$pydir" python3 -c 'import torch, strata.torch' 2>/dev/null; then
  run_step python_tests env PYTHONPATH="$pydir" python3 -m pytest -q \
    -p no:cacheprovider tests/python --ignore=tests/python/test_example.py
else
  result[python_tests]="skipped: $(python3 --version 2>&1) cannot load $(ls "$pydir"/strata/_core*.so 2>/dev/null | xargs -r basename) (or has no torch)"
fi
run_step compute_gpu_test "$(bin tests/compute_tests)" --gtest_filter='ComputeGpuTest.*'
run_step transformer_gpu_test "$(bin tests/compute_tests)" \
  --gtest_filter='TransformerGpuTest.*'
# Every vector path this CPU runs, bitwise against the scalar reference (a
# path the CPU lacks is reported SKIPPED in the log, not passed).
run_step cpu_adam_paths "$(bin tests/compute_tests)" \
  --gtest_filter='*AdamVectorPath*:*VectorPathTest*:*AdamUpdateCpu*'
# Mixed precision: CUDA casts, fused Adam and 16-bit linear layers against
# the CPU; the host casts and fused pass on every vector path (AVX-512 too).
run_step precision_gpu_test "$(bin tests/compute_tests)" \
  --gtest_filter='PrecisionGpuTest.*'
run_step half_cast_paths "$(bin tests/compute_tests)" \
  --gtest_filter='HalfCastTest.*:*HalfCastPathTest.*'
run_step mixed_adam_paths "$(bin tests/compute_tests)" \
  --gtest_filter='MixedAdamTest.*:*MixedAdamPathTest.*'
run_step cpu_adam_bench "$(bin bench/cpu_adam_bench)" --samples=3 \
  --json="$out/cpu_adam_bench.json"
run_step bench_link "$(bin apps/strata)" bench -t link --device=cuda \
  --json="$out/bench_link.json"
# A 4 GiB managed buffer (refused, not oversubscribed, if the GPU has less
# free); then the store's unified mode on the layered workload (simulated).
run_step bench_link_um "$(bin apps/strata)" bench -t link-um --device=cuda \
  --bench-size=4GiB --json="$out/bench_link_um.json"
# The MLP: 200 steps offloaded (state 4.8x a 16 MiB device budget) and
# resident; the losses must match bit for bit.
run_step train "$(bin apps/strata)" train --model=mlp --device=cuda \
  --nvme-dir="$nvme_dir" --max-steps=200 --json="$out/train.json"
run_step train_resident "$(bin apps/strata)" train --model=mlp --device=cuda \
  --resident --max-steps=200 --json="$out/train_resident.json"
run_step train_unified "$(bin apps/strata)" train --model=mlp --device=cuda \
  --memory=unified --nvme-dir="$nvme_dir" --max-steps=200 \
  --json="$out/train_unified.json"
# Mixed precision: bf16 and fp16 (16-bit matmuls on cuBLAS, casts and the
# non-finite count on the GPU, the fused mixed Adam on the host), offloaded
# and resident, bitwise equal.
for p in bf16 fp16; do
  run_step "train_$p" "$(bin apps/strata)" train --model=mlp --device=cuda \
    --precision=$p --nvme-dir="$nvme_dir" --max-steps=100 \
    --json="$out/train_$p.json"
  run_step "train_${p}_resident" "$(bin apps/strata)" train --model=mlp --device=cuda \
    --precision=$p --resident --max-steps=100 --json="$out/train_${p}_resident.json"
done
# The streamed host optimizer (a host budget below one layer's whole update:
# the device gradient and weight cross in 4 MiB parts through Lease::CopyOut
# and CopyIn), fp32 and bf16 with stochastic rounding, against resident.
stream_flags=(train --model=mlp --device=cuda --width=2048 --depth=2
  --max-steps=30)
run_step train_streamed "$(bin apps/strata)" "${stream_flags[@]}" \
  --host-budget=32MiB --device-budget=64MiB --nvme-dir="$nvme_dir" \
  --json="$out/train_streamed.json"
run_step train_streamed_resident "$(bin apps/strata)" "${stream_flags[@]}" \
  --resident --json="$out/train_streamed_resident.json"
run_step train_streamed_bf16 "$(bin apps/strata)" "${stream_flags[@]}" \
  --precision=bf16 --rounding=stochastic --host-budget=24MiB \
  --device-budget=64MiB --nvme-dir="$nvme_dir" \
  --json="$out/train_streamed_bf16.json"
run_step train_streamed_bf16_resident "$(bin apps/strata)" \
  "${stream_flags[@]}" --precision=bf16 --rounding=stochastic --resident \
  --json="$out/train_streamed_bf16_resident.json"
# The GPT (the default model): 60 steps offloaded (state 4.3x its 7.5 MiB
# device budget, NVMe in use) and resident, bitwise equal.
gpt_flags=(train --model=gpt --device=cuda --max-steps=60 --eval-tokens=8192
  --cache-dir="$out/cache" ${corpus_flag:+"$corpus_flag"})
run_step gpt "$(bin apps/strata)" "${gpt_flags[@]}" --nvme-dir="$nvme_dir" \
  --json="$out/gpt.json"
run_step gpt_resident "$(bin apps/strata)" "${gpt_flags[@]}" --resident \
  --json="$out/gpt_resident.json"
# The GPT in bf16 (16-bit matmuls, the tied classifier and the 16-bit
# embedding gather on cuBLAS/CUDA), 30 steps offloaded and resident.
run_step gpt_bf16 "$(bin apps/strata)" "${gpt_flags[@]}" --precision=bf16 \
  --max-steps=30 --nvme-dir="$nvme_dir" --json="$out/gpt_bf16.json"
run_step gpt_bf16_resident "$(bin apps/strata)" "${gpt_flags[@]}" \
  --precision=bf16 --max-steps=30 --resident --json="$out/gpt_bf16_resident.json"
same_losses() {  # same_losses A.json B.json N: N losses, bitwise equal
  python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['losses']; b=json.load(open(sys.argv[2]))['losses']; sys.exit(0 if a==b and len(a)==int(sys.argv[3]) else 1)" \
    "$1" "$2" "$3" 2>/dev/null
}
for pair in "train_identity train train_resident 200" \
    "unified_identity train_unified train_resident 200" \
    "bf16_identity train_bf16 train_bf16_resident 100" \
    "fp16_identity train_fp16 train_fp16_resident 100" \
    "streamed_identity train_streamed train_streamed_resident 30" \
    "streamed_bf16_identity train_streamed_bf16 train_streamed_bf16_resident 30" \
    "gpt_identity gpt gpt_resident 60" \
    "gpt_bf16_identity gpt_bf16 gpt_bf16_resident 30"; do
  set -- $pair
  if ! command -v python3 >/dev/null; then
    result[$1]="unchecked (no python3 to compare the JSON losses)"
  elif same_losses "$out/$2.json" "$out/$3.json" "$4"; then
    result[$1]="ok ($4 losses bitwise equal to resident)"
  else
    result[$1]="FAILED (losses differ or missing)"
  fi
done
run_step train_bench "$(bin bench/train_bench)" --device=cuda --nvme-dir="$nvme_dir" \
  --steps=40 --json="$out/train_bench.json"
run_step train_bench_gpt "$(bin bench/train_bench)" --model=gpt --device=cuda \
  --nvme-dir="$nvme_dir" --steps=20 --json="$out/train_bench_gpt.json"

echo
echo "gpu_check summary ($(cat "$out/gpu.txt"))"
printf '%-22s %s\n' step result
for k in cuda_device_test store_gpu_test unified_gpu_test device_backend_test \
    host_arena_test device_reader_wait_test stream_ordered_acquire_test \
    nccl_gpu_test python_tests compute_gpu_test transformer_gpu_test \
    precision_gpu_test \
    half_cast_paths mixed_adam_paths cpu_adam_paths \
    cpu_adam_bench bench_link bench_link_um info link_bench \
    train train_resident train_unified train_identity unified_identity \
    train_bf16 train_bf16_resident bf16_identity train_fp16 \
    train_fp16_resident fp16_identity train_streamed train_streamed_resident \
    streamed_identity train_streamed_bf16 train_streamed_bf16_resident \
    streamed_bf16_identity gpt gpt_resident gpt_identity \
    gpt_bf16 gpt_bf16_resident gpt_bf16_identity train_bench train_bench_gpt; do
  printf '%-22s %s\n' "$k" "${result[$k]}"
done
grep -E '^(h2d|d2h) ' "$out/link_bench.log" | awk '{printf "link %-17s raw %s GB/s, store %s GB/s, ratio %s\n", $1, $2, $3, $4}'
# Device acquires whose copy the GPU waited for, not the CPU (stream-ordered).
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('train queued_loads', r.get('queued_loads'), 'of', r.get('acquires'), 'acquires')" \
  "$out/train.json" 2>/dev/null
grep -E '^(resident|scheduler|on-demand) ' "$out/train_bench.log" 2>/dev/null
grep -E '^(resident|scheduler|on-demand) ' "$out/train_bench_gpt.log" 2>/dev/null |
  sed 's/^/gpt /' 
grep -E '^(bits|targets|compute ceiling)' "$out/cpu_adam_bench.log" 2>/dev/null |
  sed 's/^/cpu_adam_bench: /'
grep -E '^\[  SKIPPED \] .*AdamVectorPath' "$out/cpu_adam_paths.log" 2>/dev/null |
  sed 's/ ([0-9]* ms)$//' | sort -u | sed 's/^/cpu_adam_paths: /'
grep -E '^  (first-touch|cudaMem|pinned)' "$out/bench_link_um.log" 2>/dev/null |
  sed 's/^  /link-um /' 
for k in "${!result[@]}"; do [[ "${result[$k]}" == FAILED* ]] && exit 1; done
exit 0
