// link_bench.cc: host<->device and device-local copy bandwidth (see
// link_bench.h), and the `link` case of `strata bench` that reports it.
#include "apps/bench/link_bench.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "tiers/device/device_backend.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

// The buffers one run copies between: two device regions of the largest
// size, a pinned host arena and a pageable host buffer of that size each.
struct Buffers {
  std::unique_ptr<DeviceBackend> device;
  std::byte* dev_a = nullptr;
  std::byte* dev_b = nullptr;
  std::unique_ptr<HostArena> pinned;  // registered with the GPU when real
  std::vector<std::byte> pageable;
};

absl::StatusOr<Buffers> OpenBuffers(const LinkBenchConfig& c, uint64_t max) {
  Buffers b;
  DeviceOptions options = c.device;
  options.budget_bytes = 2 * max;
  STRATA_ASSIGN_OR_RETURN(b.device, OpenDeviceBackend(options));
  STRATA_ASSIGN_OR_RETURN(std::byte * arena, b.device->ReserveArena(2 * max));
  b.dev_a = arena;
  b.dev_b = arena + max;
  STRATA_ASSIGN_OR_RETURN(
      b.pinned, HostArena::Create(max, /*lock_memory=*/false, b.device.get()));
  b.pageable.resize(max);
  return b;
}

// Median GB/s of `samples` samples; each repeats the copy until at least
// min_sample_bytes have moved, after one warm-up copy.
absl::StatusOr<double> Measure(const LinkBenchConfig& c, DeviceBackend& dev,
                               CopyKind kind, void* dst, const void* src,
                               uint64_t bytes) {
  STRATA_RETURN_IF_ERROR(dev.Copy(kind, dst, src, bytes));  // warm-up
  const uint64_t reps =
      std::max<uint64_t>(1, (c.min_sample_bytes + bytes - 1) / bytes);
  std::vector<double> gbps;
  for (int s = 0; s < c.samples; ++s) {
    STRATA_ASSIGN_OR_RETURN(const double seconds,
                            dev.TimeCopies(kind, dst, src, bytes, reps));
    gbps.push_back(double(reps * bytes) / seconds / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  return gbps[gbps.size() / 2];
}

void Fill(std::byte* p, uint64_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    p[i] = static_cast<std::byte>(x);
  }
}

// After timing: host -> device -> device -> host must give the bytes back.
absl::Status Verify(Buffers& b, uint64_t bytes) {
  std::byte* host = b.pinned->base();
  Fill(host, bytes, 7);
  std::vector<std::byte> expect(host, host + bytes);
  STRATA_RETURN_IF_ERROR(b.device->Copy(CopyKind::kH2D, b.dev_a, host, bytes));
  STRATA_RETURN_IF_ERROR(
      b.device->Copy(CopyKind::kD2D, b.dev_b, b.dev_a, bytes));
  std::memset(b.pageable.data(), 0, bytes);
  STRATA_RETURN_IF_ERROR(
      b.device->Copy(CopyKind::kD2H, b.pageable.data(), b.dev_b, bytes));
  if (std::memcmp(b.pageable.data(), expect.data(), bytes) != 0) {
    return absl::DataLossError(
        absl::StrFormat("link bench: %s came back from the device different",
                        FormatByteSize(bytes)));
  }
  return absl::OkStatus();
}

absl::Status CheckConfig(const LinkBenchConfig& c) {
  if (c.sizes.empty() || c.samples < 3) {
    return absl::InvalidArgumentError(
        "link bench: needs at least one size and 3 samples");
  }
  for (uint64_t s : c.sizes) {
    if (s == 0) return absl::InvalidArgumentError("link bench: size 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LinkBenchResult> RunLinkBench(const LinkBenchConfig& c) {
  STRATA_RETURN_IF_ERROR(CheckConfig(c));
  const uint64_t max = *std::max_element(c.sizes.begin(), c.sizes.end());
  STRATA_ASSIGN_OR_RETURN(Buffers b, OpenBuffers(c, max));
  LinkBenchResult r;
  r.device = b.device->name();
  Fill(b.pinned->base(), max, 1);
  Fill(b.pageable.data(), max, 2);
  struct Row {
    const char* what;
    CopyKind kind;
    void* dst;
    const void* src;
    std::vector<LinkBenchPoint>* out;
  };
  const Row rows[] = {
      {"h2d pinned", CopyKind::kH2D, b.dev_a, b.pinned->base(), &r.h2d_pinned},
      {"d2h pinned", CopyKind::kD2H, b.pinned->base(), b.dev_a, &r.d2h_pinned},
      {"h2d pageable", CopyKind::kH2D, b.dev_a, b.pageable.data(),
       &r.h2d_pageable},
      {"d2h pageable", CopyKind::kD2H, b.pageable.data(), b.dev_a,
       &r.d2h_pageable},
      {"d2d", CopyKind::kD2D, b.dev_b, b.dev_a, &r.d2d},
  };
  for (const Row& row : rows) {
    for (uint64_t bytes : c.sizes) {
      if (c.progress) {
        c.progress(absl::StrFormat("%s %s", row.what, FormatByteSize(bytes)));
      }
      STRATA_ASSIGN_OR_RETURN(double gbps, Measure(c, *b.device, row.kind,
                                                   row.dst, row.src, bytes));
      row.out->push_back({.bytes = bytes, .gbps = gbps});
    }
  }
  for (uint64_t bytes : c.sizes) STRATA_RETURN_IF_ERROR(Verify(b, bytes));
  return r;
}

// The `link` case of `strata bench` (bench_case.h): its configuration from
// the request, its table, its JSON and its part of the machine profile.

namespace {

nlohmann::json PointsJson(const std::vector<LinkBenchPoint>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const LinkBenchPoint& p : points) {
    j.push_back({{"bytes", p.bytes}, {"gbps", p.gbps}});
  }
  return j;
}

absl::Status RunLinkCase(BenchContext& ctx, nlohmann::json& json) {
  LinkBenchConfig config;
  config.device = ctx.request.store.device;
  if (ctx.request.quick) {
    config.sizes = {64 << 10, 1 << 20};
    config.samples = 3;
    config.min_sample_bytes = 4 << 20;
  }
  config.progress = [&](const std::string& what) {
    ctx.Progress("link", what);
  };
  absl::StatusOr<LinkBenchResult> r = RunLinkBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF(
      "link: %s; copies through the store's device backend, median of %d "
      "samples, bytes verified; GB/s (1e9)\n",
      r->device, config.samples);
  absl::PrintF("  %-10s %11s %11s %13s %13s %9s\n", "size", "h2d pinned",
               "d2h pinned", "h2d pageable", "d2h pageable", "d2d");
  for (size_t i = 0; i < config.sizes.size(); ++i) {
    absl::PrintF("  %-10s %11.2f %11.2f %13.2f %13.2f %9.2f\n",
                 FormatByteSize(config.sizes[i]), r->h2d_pinned[i].gbps,
                 r->d2h_pinned[i].gbps, r->h2d_pageable[i].gbps,
                 r->d2h_pageable[i].gbps, r->d2d[i].gbps);
  }
  json = {{"device", r->device},
          {"samples", config.samples},
          {"h2d_pinned", PointsJson(r->h2d_pinned)},
          {"d2h_pinned", PointsJson(r->d2h_pinned)},
          {"h2d_pageable", PointsJson(r->h2d_pageable)},
          {"d2h_pageable", PointsJson(r->d2h_pageable)},
          {"d2d", PointsJson(r->d2d)}};
  ctx.profile.device = r->device;
  for (const LinkBenchPoint& p : r->h2d_pinned) {
    ctx.profile.h2d.push_back({.bytes = p.bytes, .gbps = p.gbps});
  }
  for (const LinkBenchPoint& p : r->d2h_pinned) {
    ctx.profile.d2h.push_back({.bytes = p.bytes, .gbps = p.gbps});
  }
  ctx.profiled = true;
  return absl::OkStatus();
}

}  // namespace

BenchCase LinkCase() {
  return {"link",
          "host<->device copies from pinned and pageable memory, and "
          "device-local copies, 64 KiB to 256 MiB",
          Always, RunLinkCase};
}

}  // namespace strata
