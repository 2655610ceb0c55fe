// nvme_device_bench.h: `strata bench -t nvme-device` — NVMe -> device
// bandwidth through the store itself, next to the NVMe read bandwidth of the
// same swap-file setup.
//
// Tensors homed on NVMe are written and evicted, so their only copy is on
// NVMe. A timed Acquire(kDevice, kRead) then loads each one through the
// store's pipeline (NVMe reads into a pinned bounce chunk while the previous
// chunk is copied to the device, checksum verified); the lease is released and
// the device copy dropped with Evict(kNvme) (clean: no write-back), untimed,
// before the next. A sample is one pass over every tensor, GB/s = the bytes
// over the summed Acquire times; the result is the median of `samples` after
// one warm-up pass. After timing every tensor is loaded to the device once
// more and read back from there (Store::Read) and compared byte for byte.
// The baseline, measured in the same run, is MeasureNvmeTier's sequential
// read of the same bytes with the store's directories, block size, queue
// depth and engine (O_DIRECT); the ratio says what the pipeline keeps of it.
#ifndef STRATA_APPS_BENCH_NVME_DEVICE_BENCH_H_
#define STRATA_APPS_BENCH_NVME_DEVICE_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

struct NvmeDeviceBenchConfig {
  // The store to measure: budgets, NVMe directories (required), block size,
  // queue depth, engine, device backend and link model. The NVMe budget must
  // hold `tensors` x `tensor_bytes`, the device and host budgets one tensor.
  // The bench turns prefetch off (it times loads on demand).
  StoreOptions store;
  uint64_t tensor_bytes = 64 * kMiB;  // Default: 64 MiB.
  int tensors = 4;                    // Default: 4.
  // Median of this many timed passes over the tensors after one warm-up
  // pass. Default: 3.
  int samples = 3;
};

struct NvmeDeviceBenchResult {
  double nvme_to_device_gbps = 0;  // median, 1e9 bytes/s
  double nvme_read_gbps = 0;       // baseline: sequential NVMe read, median
  double ratio = 0;                // nvme_to_device_gbps / nvme_read_gbps
  uint64_t sample_bytes = 0;       // bytes one timed pass moved
  uint64_t verified_bytes = 0;     // bytes compared after timing
  std::string device;              // Stats::device_backend
  std::string engine;              // "io_uring" or "thread-pool"
};

// Runs the bench. Errors: InvalidArgument for no NVMe directory, zero sizes
// or counts, or a budget too small (naming its flag); those of
// CheckBenchDirectory for each NVMe directory (before anything is created);
// those of Store::Open and of the transfers; DataLoss when the bytes that
// reached the device differ from those written. Leaves no file behind.
absl::StatusOr<NvmeDeviceBenchResult> RunNvmeDeviceBench(
    const NvmeDeviceBenchConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_NVME_DEVICE_BENCH_H_
