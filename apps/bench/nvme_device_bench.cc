// nvme_device_bench.cc: NVMe -> device through the store's bounce-chunk
// pipeline, next to the plain NVMe read of the same setup (see the header),
// and the `nvme-device` case of `strata bench` that reports it.
#include "apps/bench/nvme_device_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "apps/bench/nvme_bench.h"
#include "base/bench_pattern.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "strata/store.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/block_io.h"

namespace strata {
namespace {

uint64_t RoundUpDirect(uint64_t bytes) {
  return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment *
         kDirectIoAlignment;
}

// InvalidArgument naming `flag` when `budget` is under `need`.
absl::Status CheckBudget(const char* flag, uint64_t budget, uint64_t need,
                         const NvmeDeviceBenchConfig& c) {
  if (budget >= need) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "nvme-device bench: %d tensor(s) of %s need %s of %s, which is %s: "
      "raise %s or use fewer or smaller tensors",
      c.tensors, FormatByteSize(c.tensor_bytes), FormatByteSize(need), flag,
      FormatByteSize(budget), flag));
}

absl::Status CheckConfig(const NvmeDeviceBenchConfig& c) {
  if (c.store.nvme.directories.empty()) {
    return absl::InvalidArgumentError(
        "nvme-device bench: no NVMe directory (pass --nvme-dir)");
  }
  if (c.tensor_bytes == 0 || c.tensors < 1 || c.samples < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nvme-device bench: tensor size %d, count %d and samples %d must all "
        "be positive",
        c.tensor_bytes, c.tensors, c.samples));
  }
  const uint64_t on_nvme = c.tensors * RoundUpDirect(c.tensor_bytes);
  STRATA_RETURN_IF_ERROR(
      CheckBudget("--nvme-budget", c.store.nvme.budget_bytes, on_nvme, c));
  STRATA_RETURN_IF_ERROR(CheckBudget(
      "--device-budget", c.store.device.budget_bytes, c.tensor_bytes, c));
  return CheckBudget("--host-budget", c.store.host.budget_bytes, c.tensor_bytes,
                     c);
}

// Each directory holds its share of the NVMe budget (the baseline's file,
// opened after the store closes, is no larger).
absl::Status CheckDirectories(const NvmeOptions& nvme) {
  const uint64_t n = nvme.directories.size();
  const uint64_t per_dir = (nvme.budget_bytes + n - 1) / n;
  for (const std::string& dir : nvme.directories) {
    STRATA_RETURN_IF_ERROR(CheckBenchDirectory(
        dir, per_dir + nvme.block_size_bytes, "--nvme-budget"));
  }
  return absl::OkStatus();
}

// Creates the tensors on NVMe, writes pattern `i` into tensor i and evicts
// every copy above NVMe.
absl::StatusOr<std::vector<TensorId>> CreateOnNvme(
    Store& store, const NvmeDeviceBenchConfig& c) {
  std::vector<std::byte> bytes(c.tensor_bytes);
  std::vector<TensorId> ids;
  for (int i = 0; i < c.tensors; ++i) {
    STRATA_ASSIGN_OR_RETURN(
        const TensorId id,
        store.Create({.name = absl::StrFormat("nvme-device-%d", i),
                      .size_bytes = c.tensor_bytes,
                      .home = Tier::kNvme}));
    FillBenchPattern(bytes.data(), c.tensor_bytes, i);
    STRATA_RETURN_IF_ERROR(store.Write(id, bytes.data(), c.tensor_bytes));
    STRATA_RETURN_IF_ERROR(store.Evict(id, Tier::kNvme));
    ids.push_back(id);
  }
  return ids;
}

// One pass: the seconds the Acquire(kDevice, kRead) calls took, summed.
absl::StatusOr<double> TimeOnePass(Store& store,
                                   const std::vector<TensorId>& ids) {
  double seconds = 0;
  for (const TensorId id : ids) {
    const auto start = std::chrono::steady_clock::now();
    STRATA_ASSIGN_OR_RETURN(Lease lease,
                            store.Acquire(id, Tier::kDevice, Access::kRead));
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    STRATA_RETURN_IF_ERROR(lease.Release());
    STRATA_RETURN_IF_ERROR(store.Evict(id, Tier::kNvme));  // clean: dropped
  }
  return seconds;
}

absl::StatusOr<double> MedianLoadGbps(Store& store,
                                      const std::vector<TensorId>& ids,
                                      const NvmeDeviceBenchConfig& c) {
  STRATA_RETURN_IF_ERROR(TimeOnePass(store, ids).status());  // warm-up
  std::vector<double> seconds;
  for (int i = 0; i < c.samples; ++i) {
    STRATA_ASSIGN_OR_RETURN(const double s, TimeOnePass(store, ids));
    seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  return c.tensors * c.tensor_bytes / seconds[seconds.size() / 2] / 1e9;
}

// Loads each tensor NVMe -> device once more, reads it back from the device
// copy and compares; returns the bytes checked.
absl::StatusOr<uint64_t> VerifyOnDevice(Store& store,
                                        const std::vector<TensorId>& ids,
                                        const NvmeDeviceBenchConfig& c) {
  std::vector<std::byte> bytes(c.tensor_bytes);
  uint64_t verified = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(
        Lease lease, store.Acquire(ids[i], Tier::kDevice, Access::kRead));
    STRATA_RETURN_IF_ERROR(lease.Release());
    // The device copy is the nearest valid one, so Read copies from it.
    STRATA_RETURN_IF_ERROR(store.Read(ids[i], bytes.data(), c.tensor_bytes));
    if (const auto bad = FindPatternMismatch(bytes.data(), c.tensor_bytes, i)) {
      return absl::DataLossError(absl::StrFormat(
          "nvme-device bench: byte %d of tensor %d differs on the device from "
          "the byte written",
          *bad, i));
    }
    verified += c.tensor_bytes;
    STRATA_RETURN_IF_ERROR(store.Evict(ids[i], Tier::kNvme));
  }
  return verified;
}

// The store's half: fills the result but for the baseline.
absl::Status MeasureThroughStore(const NvmeDeviceBenchConfig& c,
                                 NvmeDeviceBenchResult& r) {
  StoreOptions options = c.store;
  options.scheduler.prefetch = false;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(options));
  STRATA_ASSIGN_OR_RETURN(const std::vector<TensorId> ids,
                          CreateOnNvme(*store, c));
  STRATA_ASSIGN_OR_RETURN(r.nvme_to_device_gbps,
                          MedianLoadGbps(*store, ids, c));
  STRATA_ASSIGN_OR_RETURN(r.verified_bytes, VerifyOnDevice(*store, ids, c));
  const Stats stats = store->GetStats();
  r.device = stats.device_backend;
  r.engine = stats.io_engine;
  return absl::OkStatus();
}

// The baseline: sequential NVMe read of the same bytes, same NVMe settings.
absl::StatusOr<double> BaselineReadGbps(const NvmeDeviceBenchConfig& c,
                                        uint64_t bytes) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HostArena> buffer,
                          HostArena::Create(bytes, false, nullptr));
  FillBenchPattern(buffer->base(), bytes, 0);
  NvmeMeasureConfig m;
  m.nvme = c.store.nvme;
  m.bytes = bytes;
  m.samples = c.samples;
  STRATA_ASSIGN_OR_RETURN(
      const NvmeMeasurement measured,
      MeasureNvmeTier(m, buffer->base(), buffer->size_bytes()));
  return measured.read_gbps;
}

}  // namespace

absl::StatusOr<NvmeDeviceBenchResult> RunNvmeDeviceBench(
    const NvmeDeviceBenchConfig& c) {
  STRATA_RETURN_IF_ERROR(CheckConfig(c));
  STRATA_RETURN_IF_ERROR(CheckDirectories(c.store.nvme));
  NvmeDeviceBenchResult r;
  r.sample_bytes = c.tensors * c.tensor_bytes;
  STRATA_RETURN_IF_ERROR(MeasureThroughStore(c, r));
  STRATA_ASSIGN_OR_RETURN(r.nvme_read_gbps,
                          BaselineReadGbps(c, RoundUpDirect(r.sample_bytes)));
  r.ratio = r.nvme_to_device_gbps / r.nvme_read_gbps;
  return r;
}

// The `nvme-device` case of `strata bench` (bench_case.h): its
// configuration from the request, its table and its JSON.

namespace {

absl::Status RunNvmeDeviceCase(BenchContext& ctx, nlohmann::json& json) {
  NvmeDeviceBenchConfig config;
  config.store = ctx.request.store;
  if (ctx.request.quick) {
    config.tensor_bytes = 1 << 20;
    config.tensors = 2;
  }
  // Budgets for what this case moves, not the training defaults: the NVMe
  // directory then needs only that much free space.
  const uint64_t block = config.store.nvme.block_size_bytes;
  const uint64_t all = config.tensors * config.tensor_bytes;
  config.store.nvme.budget_bytes = (all + 2 * block) / block * block;
  config.store.device.budget_bytes = config.tensor_bytes + (1 << 20);
  config.store.host.budget_bytes = config.tensor_bytes + (1 << 20);
  absl::PrintF(
      "nvme-device: %d tensors x %s homed on NVMe, loaded to the device "
      "through the store's pinned bounce chunks (block %s, queue depth %d), "
      "median of %d, bytes verified\n",
      config.tensors, FormatByteSize(config.tensor_bytes),
      FormatByteSize(config.store.nvme.block_size_bytes),
      config.store.nvme.queue_depth, config.samples);
  std::fflush(stdout);
  ctx.Progress("nvme-device", "loading");
  absl::StatusOr<NvmeDeviceBenchResult> r = RunNvmeDeviceBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF("  %-22s %10s\n", "path", "GB/s");
  absl::PrintF("  %-22s %10.2f\n", "NVMe -> device", r->nvme_to_device_gbps);
  absl::PrintF("  %-22s %10.2f\n", "NVMe read (baseline)", r->nvme_read_gbps);
  absl::PrintF("  ratio %.3f (device %s, %s)\n", r->ratio, r->device,
               r->engine);
  json = {{"nvme_to_device_gbps", r->nvme_to_device_gbps},
          {"nvme_read_gbps", r->nvme_read_gbps},
          {"ratio", r->ratio},
          {"tensor_bytes", config.tensor_bytes},
          {"tensors", config.tensors},
          {"verified_bytes", r->verified_bytes},
          {"device", r->device},
          {"engine", r->engine}};
  return absl::OkStatus();
}

}  // namespace

BenchCase NvmeDeviceCase() {
  return {"nvme-device",
          "NVMe -> device through the store's pinned bounce-chunk pipeline, "
          "next to the NVMe read it is built on",
          NeedsNvmeDir, RunNvmeDeviceCase};
}

}  // namespace strata
