// nvme_sweep.h: `strata bench -t nvme-sweep` — the store's NVMe read and write
// bandwidth over a grid of request (block) size x queue depth, the tuning
// DeepSpeed's ds_nvme_tune does, in seconds rather than minutes, with fio at
// the best point for comparison.
//
// Each point opens its own NvmeTier exactly as the store does (an O_TMPFILE
// swap file opened O_DIRECT, so the page cache neither helps nor hides
// anything; io_uring or the thread pool) with that block size and queue depth,
// and runs MeasureNvmeTier: sequential writes then reads, the median of
// `samples` timed passes after a warm-up pass, every byte read checked after
// timing. Bytes per point are adaptive so a sweep stays short where small
// requests are slow: a probe write sizes each pass to about
// `seconds_per_sample`, never more than `bytes_per_point` and never less than
// one full queue (block x depth) where `bytes_per_point` allows; each point
// reports the bytes one pass moved. At points where bytes_per_point / block is
// below the queue depth (say 16 MiB x 128) the queue never fills, so such
// points measure the smaller depth.
#ifndef STRATA_APPS_BENCH_NVME_SWEEP_H_
#define STRATA_APPS_BENCH_NVME_SWEEP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

struct NvmeSweepConfig {
  // Where the swap files go (one at a time, none left behind).
  // Default: /var/tmp.
  std::string directory = "/var/tmp";
  // Request sizes: multiples of 4 KiB, at most 64 MiB.
  // Default: 4 KiB, 16 KiB, 64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB.
  std::vector<uint64_t> block_sizes = {4 << 10,  16 << 10, 64 << 10, 256 << 10,
                                       1 * kMiB, 4 * kMiB, 16 * kMiB};
  // Requests in flight; each > 0. Default: 1, 4, 16, 32, 64, 128.
  std::vector<uint32_t> queue_depths = {1, 4, 16, 32, 64, 128};
  // The most bytes one pass moves per direction at a point (rounded down to
  // whole blocks, at least one block); also the disk space and the pinned
  // buffer the sweep needs. Default: 64 MiB.
  uint64_t bytes_per_point = 64 * kMiB;
  // Median of this many timed passes per direction after one warm-up pass
  // (1 or 2 for a smoke test only). Default: 3.
  int samples = 3;
  // Adaptive pass size, seconds a pass should take (see the file comment);
  // 0 always moves bytes_per_point. Default: 0.05.
  double seconds_per_sample = 0.05;
  // Run fio at the best point with the same settings. Default: true.
  bool run_fio = true;
  // strata's I/O engine (fio always uses io_uring). Default: kAuto.
  IoEngine engine = IoEngine::kAuto;
  // Called before each point (and before fio) with the steps done, the
  // total, and what runs next; once more at the end with done == total and
  // "done". May be empty.
  std::function<void(int done, int total, const std::string& what)> progress;
};

struct NvmeSweepPoint {
  uint64_t block_bytes = 0;
  uint32_t queue_depth = 0;
  double read_gbps = 0;       // median, 1e9 bytes/s
  double write_gbps = 0;      // median, 1e9 bytes/s
  uint64_t sample_bytes = 0;  // bytes one timed pass moved (adaptive)
};

struct NvmeSweepResult {
  std::vector<NvmeSweepPoint> points;  // every (block, depth), block-major
  NvmeSweepPoint best;  // the highest min(read, write); the first on ties
  // fio at `best` with its block, depth and sample_bytes (nullopt: not run;
  // fio_note says why).
  std::optional<double> fio_read_gbps, fio_write_gbps;
  std::string fio_note;
  std::string engine;       // "io_uring" or "thread-pool"
  double wall_seconds = 0;  // the whole sweep, fio included
};

// Runs the sweep. Errors: InvalidArgument for an empty grid, a block size
// that is not a positive multiple of 4 KiB or above 64 MiB, a zero queue
// depth, bytes_per_point under 4 KiB or samples < 1; those of
// CheckBenchDirectory (before anything is created); those of opening a swap
// file or of its I/O, naming the point; DataLoss when bytes read back differ
// from those written. Leaves no file behind.
absl::StatusOr<NvmeSweepResult> RunNvmeSweep(const NvmeSweepConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_NVME_SWEEP_H_
