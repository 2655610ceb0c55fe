// nvme_sweep.cc: the block size x queue depth sweep of nvme_sweep.h, built on
// MeasureNvmeTier and RunFio (nvme_bench.h), and the `nvme-sweep` case of
// `strata bench` that reports it and fills the machine profile's NVMe part.
#include "apps/bench/nvme_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "apps/bench/nvme_bench.h"
#include "base/bench_pattern.h"
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

// The `nvme-sweep` case of `strata bench` (bench_case.h): its configuration
// from the request, its grid, its JSON and its part of the machine profile.

namespace {

// The sweep's grid: one row per block size, "read/write" GB/s per depth.
void PrintSweep(const NvmeSweepConfig& c, const NvmeSweepResult& r) {
  absl::PrintF("  %-10s", "block \\ QD");
  for (uint32_t qd : c.queue_depths) absl::PrintF(" %11d", qd);
  absl::PrintF("   (read/write GB/s)\n");
  size_t i = 0;
  for (uint64_t block : c.block_sizes) {
    absl::PrintF("  %-10s", FormatByteSize(block));
    for (size_t q = 0; q < c.queue_depths.size(); ++q, ++i) {
      absl::PrintF(" %5.2f/%5.2f", r.points[i].read_gbps,
                   r.points[i].write_gbps);
    }
    absl::PrintF("\n");
  }
  absl::PrintF("  best: block %s, queue depth %d: read %.2f, write %.2f GB/s\n",
               FormatByteSize(r.best.block_bytes), r.best.queue_depth,
               r.best.read_gbps, r.best.write_gbps);
  if (r.fio_read_gbps && r.fio_write_gbps) {
    absl::PrintF(
        "  fio at the best point: read %.2f, write %.2f GB/s; strata/fio "
        "%.3f read, %.3f write\n",
        *r.fio_read_gbps, *r.fio_write_gbps,
        r.best.read_gbps / *r.fio_read_gbps,
        r.best.write_gbps / *r.fio_write_gbps);
  } else if (!r.fio_note.empty()) {
    absl::PrintF("  fio: %s\n", r.fio_note);
  }
}

absl::Status RunNvmeSweepCase(BenchContext& ctx, nlohmann::json& json) {
  NvmeSweepConfig config;
  config.directory = ctx.request.store.nvme.directories.front();
  config.engine = ctx.request.store.nvme.engine;
  if (ctx.request.quick) {
    config.block_sizes = {4 << 10, 64 << 10};
    config.queue_depths = {1, 4};
    config.bytes_per_point = 1 << 20;
  }
  config.progress = [&](int done, int total, const std::string& what) {
    ctx.Progress("nvme-sweep", absl::StrFormat("%d/%d %s", done, total, what));
  };
  absl::PrintF(
      "nvme-sweep: block size x queue depth in %s, O_DIRECT, up to %s per "
      "pass, median of %d, bytes verified\n",
      config.directory, FormatByteSize(config.bytes_per_point), config.samples);
  std::fflush(stdout);
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  PrintSweep(config, *r);
  nlohmann::json points = nlohmann::json::array();
  for (const NvmeSweepPoint& p : r->points) {
    points.push_back({{"block_size_bytes", p.block_bytes},
                      {"queue_depth", p.queue_depth},
                      {"read_gbps", p.read_gbps},
                      {"write_gbps", p.write_gbps},
                      {"sample_bytes", p.sample_bytes}});
  }
  json = {{"points", points},
          {"best",
           {{"block_size_bytes", r->best.block_bytes},
            {"queue_depth", r->best.queue_depth},
            {"read_gbps", r->best.read_gbps},
            {"write_gbps", r->best.write_gbps}}},
          {"engine", r->engine},
          {"directory", config.directory}};
  if (r->fio_read_gbps && r->fio_write_gbps) {
    json["fio_read_gbps"] = *r->fio_read_gbps;
    json["fio_write_gbps"] = *r->fio_write_gbps;
  }
  ctx.profile.nvme_block_size_bytes = r->best.block_bytes;
  ctx.profile.nvme_queue_depth = r->best.queue_depth;
  ctx.profile.nvme_read_gbps = r->best.read_gbps;
  ctx.profile.nvme_write_gbps = r->best.write_gbps;
  ctx.profile.nvme_directory = config.directory;
  ctx.profiled = true;
  ctx.sweep = *std::move(r);
  return absl::OkStatus();
}

}  // namespace

BenchCase NvmeSweepCase() {
  return {"nvme-sweep",
          "NVMe block size (4 KiB-16 MiB) x queue depth (1-128) sweep; reports "
          "the best setting (--profile saves it), fio at that point",
          NeedsNvmeDir, RunNvmeSweepCase};
}

}  // namespace strata
