// link_bench.h: `strata bench -t link` — what the host<->device link and the
// device's own memory deliver: H2D and D2H copies from pinned (page-locked,
// registered) and from pageable host memory, and device-local copies, at a
// range of sizes. Copies go through the store's own DeviceBackend (on a GPU,
// cudaMemcpyAsync on its copy streams, timed with CUDA events; on the
// simulated device, memcpy held to its link model, wall-clock timed). Method
// as nvbandwidth: one warm-up, then each sample repeats the copy until at
// least `min_sample_bytes` have moved, median of `samples`; the bytes are
// verified after timing. GB = 1e9 bytes.
#ifndef STRATA_APPS_BENCH_LINK_BENCH_H_
#define STRATA_APPS_BENCH_LINK_BENCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

struct LinkBenchConfig {
  DeviceOptions device;  // backend and simulated link model; budget ignored
  // Copy sizes, ascending. Default: 64 KiB, 1 MiB, 16 MiB, 256 MiB.
  std::vector<uint64_t> sizes = {64 << 10, 1 << 20, 16 << 20, 256 << 20};
  int samples = 5;                        // median of these (at least 3)
  uint64_t min_sample_bytes = 256 << 20;  // bytes one sample moves, at least
  // Called before each measurement ("h2d pinned 16 MiB"); may be empty.
  std::function<void(const std::string& what)> progress;
};

struct LinkBenchPoint {
  uint64_t bytes = 0;  // per copy
  double gbps = 0;     // median
};

struct LinkBenchResult {
  std::string device;  // "cuda:<name>" or "simulated"
  std::vector<LinkBenchPoint> h2d_pinned, d2h_pinned;
  std::vector<LinkBenchPoint> h2d_pageable, d2h_pageable;
  std::vector<LinkBenchPoint> d2d;  // device-local copies
};

// InvalidArgument for no sizes, a zero size or samples < 3; the device
// backend's errors (ResourceExhausted when the device lacks 2x the largest
// size); DataLoss when bytes read back differ from those written.
absl::StatusOr<LinkBenchResult> RunLinkBench(const LinkBenchConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_LINK_BENCH_H_
