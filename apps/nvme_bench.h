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
#ifndef STRATA_APPS_NVME_BENCH_H_
#define STRATA_APPS_NVME_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/options.h"
#include "tiers/nvme/nvme_tier.h"

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

// One write+read measurement of an NvmeTier.
struct NvmeMeasureConfig {
  // Directories, block size, queue depth and engine of the tier to measure;
  // budget_bytes is ignored (the tier holds `bytes`).
  NvmeOptions nvme;
  // Bytes per pass, sequential from address 0; a positive multiple of the
  // block size.
  uint64_t bytes = 0;
  int samples = 3;  // median of this many timed passes after one warm-up
  // When > 0, a probe write (run twice and the second timed: the first also
  // allocates the fresh file's extents) measures the rate, and the passes
  // move about rate x this many seconds instead, rounded down to whole blocks,
  // at least min(bytes, one full queue: block x queue depth, and 1 MiB),
  // at most `bytes`. 0: always `bytes`. Default: 0.
  double target_sample_seconds = 0;
  // Wraps the tier's I/O engine (tests put a fault injector here).
  // Default: none.
  NvmeTier::BlockIoWrapper wrap_io = nullptr;
};

struct NvmeMeasurement {
  double read_gbps = 0;       // median, 1e9 bytes/s
  double write_gbps = 0;      // median, 1e9 bytes/s
  uint64_t sample_bytes = 0;  // bytes one timed pass moved
  std::string engine;         // "io_uring" or "thread-pool"
};

// Opens an NvmeTier as the store would (O_DIRECT, O_TMPFILE), times
// `samples` sequential write passes and then read passes of
// `config.bytes` (each after one untimed warm-up pass), then checks every byte
// of the last read against the pattern and closes the tier (deleting its
// file). `buffer` (4 KiB-aligned, `buffer_bytes` >= config.bytes, registered
// with io_uring) must hold FillBenchPattern(seed 0) over its first
// config.bytes bytes; it does again on success. Errors: InvalidArgument for a
// bad config; those of NvmeTier::Open and of the I/O; DataLoss when the bytes
// read back differ from those written.
absl::StatusOr<NvmeMeasurement> MeasureNvmeTier(const NvmeMeasureConfig& config,
                                                std::byte* buffer,
                                                uint64_t buffer_bytes);

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

#endif  // STRATA_APPS_NVME_BENCH_H_
