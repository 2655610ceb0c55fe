// nvme_measure.h: the NVMe tier's own bandwidth, measured: sequential write
// and read passes of an NvmeTier opened as the store opens it (O_DIRECT,
// O_TMPFILE, registered buffers), every byte checked after timing.
//
// `strata bench -t nvme` reports it beside fio; train_bench uses it for its
// I/O bound. It sits with the tier so that both reach it without reaching
// each other.
#ifndef STRATA_TIERS_NVME_NVME_MEASURE_H_
#define STRATA_TIERS_NVME_NVME_MEASURE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "strata/options.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {

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

// MeasureNvmeTier with a buffer of its own: a page-aligned host buffer of
// config.bytes, filled with the pattern, released on return. Same errors,
// plus ResourceExhausted when the buffer cannot be had.
absl::StatusOr<NvmeMeasurement> MeasureNvme(const NvmeMeasureConfig& config);

}  // namespace strata

#endif  // STRATA_TIERS_NVME_NVME_MEASURE_H_
