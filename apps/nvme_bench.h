// nvme_bench.h: `strata bench -t nvme` — sequential read and write bandwidth
// of the store's own NVMe path (NvmeTier: O_DIRECT swap file, io_uring or the
// thread pool, block-size requests at a queue depth) next to fio with the same
// directory, block size, queue depth, direct=1 and ioengine=io_uring, and, like
// strata, registered buffers and files (fixedbufs, registerfiles: without
// them fio pins pages per request and ran at 0.4x here).
#ifndef STRATA_APPS_NVME_BENCH_H_
#define STRATA_APPS_NVME_BENCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace strata {

struct NvmeBenchConfig {
  std::string directory = "/var/tmp";
  uint64_t size_bytes = 256 << 20;  // per pass
  uint64_t block_bytes = 1 << 20;
  uint32_t queue_depth = 32;
  int samples = 3;  // median of this many timed passes after one warm-up
};

struct NvmeBenchResult {
  double read_gbps = 0;
  double write_gbps = 0;
  std::string engine;                   // "io_uring" or "thread-pool"
  std::optional<double> fio_read_gbps;  // nullopt: fio not installed
  std::optional<double> fio_write_gbps;
  std::string fio_note;  // why fio did not run, if it did not
};

// InvalidArgument/NotFound/... from opening the swap file as the store would;
// DataLoss if the bytes read back differ from those written.
absl::StatusOr<NvmeBenchResult> RunNvmeBench(const NvmeBenchConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_NVME_BENCH_H_
