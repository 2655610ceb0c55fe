// um_link_bench.h: `strata bench -t link-um` — how fast unified (managed)
// memory reaches a real GPU, mechanism by mechanism, next to a pinned copy.
//
// One managed buffer (cudaMallocManaged, refused above the GPU's free memory
// less ManagedMarginBytes) starts on the host before each sample and is moved
// to the device by: first-touch page faults from a streaming kernel;
// cudaMemPrefetchAsync of the whole buffer (CUDA 13: a cudaMemLocation);
// cudaMemPrefetchBatchAsync over `chunk_bytes` ranges; and
// cudaMemDiscardAndPrefetchBatchAsync (dead contents: nothing crosses). A
// prefetch back to the host is the eviction path. A cudaMemcpyAsync from
// pinned memory into a cudaMalloc buffer of the same size is the ceiling.
// Method as nvbandwidth: a warm-up, then `samples` samples timed with CUDA
// events, median; the buffer's contents are verified on the host after the
// prefetch and eviction runs. GB = 1e9 bytes. CUDA only: without a GPU (or a
// build without CUDA) FailedPrecondition says why.
#ifndef STRATA_APPS_BENCH_UM_LINK_BENCH_H_
#define STRATA_APPS_BENCH_UM_LINK_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

struct UnifiedLinkBenchConfig {
  int cuda_device = 0;
  uint64_t bytes = uint64_t{4} << 30;        // the managed buffer
  uint64_t chunk_bytes = uint64_t{2} << 20;  // ranges of the batch calls
  int samples = 3;                           // median of these (at least 3)
  // Called before each measurement ("prefetch"); may be empty.
  std::function<void(const std::string& what)> progress;
};

struct UnifiedLinkBenchResult {
  std::string device;  // "cuda:<name>"
  uint64_t bytes = 0;
  double fault_gbps = 0;     // first-touch faults from a streaming kernel
  double prefetch_gbps = 0;  // one cudaMemPrefetchAsync, host -> device
  // cudaMemPrefetchBatchAsync / cudaMemDiscardAndPrefetchBatchAsync over
  // chunk_bytes ranges; 0 when the GPU lacks concurrent managed access.
  double batch_prefetch_gbps = 0;
  double discard_prefetch_gbps = 0;
  double evict_gbps = 0;        // cudaMemPrefetchAsync, device -> host
  double pinned_copy_gbps = 0;  // cudaMemcpyAsync from pinned memory
  bool batched = false;         // the batch calls are available
  uint64_t verified_bytes = 0;
};

// InvalidArgument for a zero size or chunk, or samples < 3;
// FailedPrecondition without a GPU; ResourceExhausted when the buffer does not
// fit the GPU's free memory less the margin; Internal on a CUDA error (named);
// DataLoss if the bytes read back differ.
absl::StatusOr<UnifiedLinkBenchResult> RunUnifiedLinkBench(
    const UnifiedLinkBenchConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_UM_LINK_BENCH_H_
