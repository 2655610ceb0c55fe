// nvme_sweep.cc: the block size x queue depth sweep of nvme_sweep.h, built on
// MeasureNvmeTier and RunFio (nvme_bench.h).
#include "apps/nvme_sweep.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/str_format.h"
#include "apps/bench_pattern.h"
#include "apps/nvme_bench.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/block_io.h"

namespace strata {
namespace {

// The largest request size the store accepts (NvmeOptions).
constexpr uint64_t kMaxBlockBytes = 64 * kMiB;

absl::Status CheckSweepConfig(const NvmeSweepConfig& c) {
  if (c.block_sizes.empty() || c.queue_depths.empty()) {
    return absl::InvalidArgumentError(
        "NVMe sweep: no block sizes or no queue depths to sweep");
  }
  for (const uint64_t block : c.block_sizes) {
    if (block == 0 || block % kDirectIoAlignment != 0 ||
        block > kMaxBlockBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "NVMe sweep: block size %d bytes is not a positive multiple of "
          "4 KiB up to 64 MiB",
          block));
    }
  }
  for (const uint32_t depth : c.queue_depths) {
    if (depth == 0) {
      return absl::InvalidArgumentError("NVMe sweep: queue depth 0");
    }
  }
  if (c.bytes_per_point < kDirectIoAlignment) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NVMe sweep: %d bytes per point; at least 4 KiB", c.bytes_per_point));
  }
  if (c.samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NVMe sweep: %d samples; at least 1", c.samples));
  }
  return absl::OkStatus();
}

// The most bytes one pass moves at block size `block`: bytes_per_point in
// whole blocks, at least one block.
uint64_t PointCapBytes(const NvmeSweepConfig& c, uint64_t block) {
  return std::max(block, c.bytes_per_point / block * block);
}

// The buffer and disk space the sweep needs: the largest point.
uint64_t SweepBytes(const NvmeSweepConfig& c) {
  uint64_t bytes = 0;
  for (const uint64_t block : c.block_sizes) {
    bytes = std::max(bytes, PointCapBytes(c, block));
  }
  return bytes;
}

std::string PointName(uint64_t block, uint32_t depth) {
  return absl::StrFormat("block %s, queue depth %d", FormatByteSize(block),
                         depth);
}

absl::StatusOr<NvmeMeasurement> MeasurePoint(const NvmeSweepConfig& c,
                                             uint64_t block, uint32_t depth,
                                             HostArena& buffer) {
  NvmeMeasureConfig m;
  m.nvme.directories = {c.directory};
  m.nvme.block_size_bytes = block;
  m.nvme.queue_depth = depth;
  m.nvme.engine = c.engine;
  m.bytes = PointCapBytes(c, block);
  m.samples = c.samples;
  m.target_sample_seconds = c.seconds_per_sample;
  absl::StatusOr<NvmeMeasurement> r =
      MeasureNvmeTier(m, buffer.base(), buffer.size_bytes());
  if (r.ok()) return r;
  return absl::Status(
      r.status().code(),
      absl::StrFormat("NVMe sweep at %s: %s", PointName(block, depth),
                      r.status().message()));
}

double MinGbps(const NvmeSweepPoint& p) {
  return std::min(p.read_gbps, p.write_gbps);
}

// Every point in block-major order; fills points and engine.
absl::Status SweepPoints(const NvmeSweepConfig& c, int total,
                         NvmeSweepResult& r) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HostArena> buffer,
                          HostArena::Create(SweepBytes(c), false, nullptr));
  FillBenchPattern(buffer->base(), buffer->size_bytes(), 0);
  for (const uint64_t block : c.block_sizes) {
    for (const uint32_t depth : c.queue_depths) {
      if (c.progress) {
        c.progress(static_cast<int>(r.points.size()), total,
                   PointName(block, depth));
      }
      STRATA_ASSIGN_OR_RETURN(const NvmeMeasurement m,
                              MeasurePoint(c, block, depth, *buffer));
      r.engine = m.engine;
      r.points.push_back(
          {block, depth, m.read_gbps, m.write_gbps, m.sample_bytes});
    }
  }
  return absl::OkStatus();
}

void RunFioAtBest(const NvmeSweepConfig& c, int total, NvmeSweepResult& r) {
  if (!c.run_fio) {
    r.fio_note = "fio not run (run_fio is off)";
    return;
  }
  if (c.progress) {
    c.progress(total - 1, total,
               "fio at " + PointName(r.best.block_bytes, r.best.queue_depth));
  }
  FioRates fio = RunFio(c.directory, r.best.sample_bytes, r.best.block_bytes,
                        r.best.queue_depth, c.samples + 1);
  r.fio_read_gbps = fio.read_gbps;
  r.fio_write_gbps = fio.write_gbps;
  r.fio_note = fio.note;
}

}  // namespace

absl::StatusOr<NvmeSweepResult> RunNvmeSweep(const NvmeSweepConfig& c) {
  const auto start = std::chrono::steady_clock::now();
  STRATA_RETURN_IF_ERROR(CheckSweepConfig(c));
  STRATA_RETURN_IF_ERROR(CheckBenchDirectory(c.directory, SweepBytes(c)));
  const int total =
      static_cast<int>(c.block_sizes.size() * c.queue_depths.size()) +
      (c.run_fio ? 1 : 0);
  NvmeSweepResult r;
  STRATA_RETURN_IF_ERROR(SweepPoints(c, total, r));
  r.best =
      *std::max_element(r.points.begin(), r.points.end(),
                        [](const NvmeSweepPoint& a, const NvmeSweepPoint& b) {
                          return MinGbps(a) < MinGbps(b);
                        });
  RunFioAtBest(c, total, r);
  if (c.progress) c.progress(total, total, "done");
  r.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return r;
}

}  // namespace strata
