// nvme_bench.h: `strata bench -t nvme` — sequential read and write bandwidth
// of the store's own NVMe path (NvmeTier: O_DIRECT swap file, io_uring or the
// thread pool, block-size requests at a queue depth) next to fio with the same
// directory, block size, queue depth, direct=1 and ioengine=io_uring, and, like
// strata, registered buffers and files (fixedbufs, registerfiles: without
// them fio pins pages per request and ran at 0.4x here).
//
// Also the pieces the other NVMe benches (nvme_sweep.h, nvme_device_bench.h)
// share: the directory check, one timed write+read measurement of an NvmeTier
// and the fio run.
#ifndef STRATA_APPS_BENCH_NVME_BENCH_H_
#define STRATA_APPS_BENCH_NVME_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/options.h"
#include "tiers/nvme/nvme_measure.h"

namespace strata {

struct NvmeBenchConfig {
  std::string directory = "/var/tmp";
  uint64_t size_bytes = 256 << 20;  // per pass
  uint64_t block_bytes = 1 << 20;
  uint32_t queue_depth = 32;
  int samples = 3;  // median of this many timed passes after one warm-up
  // strata's engine (fio always uses io_uring). Default: kAuto.
  IoEngine engine = IoEngine::kAuto;
};

struct NvmeBenchResult {
  double read_gbps = 0;
  double write_gbps = 0;
  std::string engine;                   // "io_uring" or "thread-pool"
  std::optional<double> fio_read_gbps;  // nullopt: fio not installed
  std::optional<double> fio_write_gbps;
  std::string fio_note;  // why fio did not run, if it did not
};

// Errors: those of CheckBenchDirectory (nothing is created then);
// InvalidArgument/... from opening the swap file as the store would; DataLoss
// if the bytes read back differ from those written. Leaves no file behind.
absl::StatusOr<NvmeBenchResult> RunNvmeBench(const NvmeBenchConfig& config);

// ---- Shared by the NVMe benches ----

// The nvme case's bytes per pass under --quick without a --bench-size.
inline constexpr uint64_t kNvmeQuickBytes = 4 * kMiB;

// Free space CheckBenchDirectory keeps on top of what a bench asks for.
inline constexpr uint64_t kBenchDiskMarginBytes = 64 * kMiB;

// OK when `dir` is a writable directory with at least bytes_needed +
// kBenchDiskMarginBytes free. NotFound when it does not exist;
// FailedPrecondition when it is not a directory; PermissionDenied when this
// user cannot create files in it (or it is on a read-only file system);
// ResourceExhausted when space is short, saying how much is free and needed
// and to lower `size_flag` or pass another --nvme-dir. Creates nothing.
absl::Status CheckBenchDirectory(const std::string& dir, uint64_t bytes_needed,
                                 std::string_view size_flag = "--bench-size");

// RunNvmeBench's own measurement, without fio: the store's NVMe path at
// `config`'s directory, size, block size and queue depth. Same errors.
absl::StatusOr<NvmeMeasurement> MeasureStoreNvme(const NvmeBenchConfig& config);

// fio's sequential write and read bandwidth, nullopt (and `note` says why)
// when fio is missing or failed.
struct FioRates {
  std::optional<double> read_gbps;  // 1e9 bytes/s
  std::optional<double> write_gbps;
  std::string note;
};

// Runs fio twice on one file in `directory` (a hidden name, removed when fio
// is done): rw=write then rw=read of `bytes` in `block_bytes` requests at
// `queue_depth`, direct=1, io_uring with registered buffers and files, `loops`
// passes each (fio reports their mean). Never fails; see FioRates::note.
FioRates RunFio(const std::string& directory, uint64_t bytes,
                uint64_t block_bytes, uint32_t queue_depth, int loops);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_NVME_BENCH_H_
