// um_link_bench.cc: the `link-um` case of `strata bench` (whether it applies,
// its table and JSON), and the measurement's answer in a build without CUDA
// (the measurement itself is in cuda_um_link_bench.cu).
#include "apps/bench/um_link_bench.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "base/byte_size.h"
#include "tiers/device/device_backend.h"

namespace strata {

#ifndef STRATA_HAVE_CUDA
absl::StatusOr<UnifiedLinkBenchResult> RunUnifiedLinkBench(
    const UnifiedLinkBenchConfig& /*config*/) {
  return absl::FailedPreconditionError(
      "unified-memory link bench needs CUDA: strata was built without it");
}
#endif

// The `link-um` case of `strata bench` (bench_case.h): whether it applies
// here, its configuration from the request, its table and its JSON.

namespace {

// Unified-memory link speeds mean something only on a GPU: on the simulated
// device a prefetch is its link model (the unified case shows that).
std::string NeedsGpu(const BenchRequest& r) {
  DeviceOptions options = r.store.device;
  options.budget_bytes = 256;  // probing only
  std::string why;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      OpenDeviceBackend(options, &why);
  if (!device.ok()) return std::string(device.status().message());
  if (!(*device)->is_simulated()) return "";
  return absl::StrFormat(
      "needs a GPU (%s); on the simulated device a prefetch is just its link "
      "model: see -t unified",
      why);
}

absl::Status RunLinkUmCase(BenchContext& ctx, nlohmann::json& json) {
  UnifiedLinkBenchConfig config;
  config.cuda_device = ctx.request.store.device.cuda_device;
  config.bytes = ctx.request.BenchBytes(64 << 20);
  config.progress = [&](const std::string& what) {
    ctx.Progress("link-um", what);
  };
  absl::PrintF(
      "link-um: %s managed buffer (cudaMallocManaged), on the host before "
      "each sample; median of %d event-timed samples; GB/s (1e9)\n",
      FormatByteSize(config.bytes), config.samples);
  std::fflush(stdout);
  absl::StatusOr<UnifiedLinkBenchResult> r = RunUnifiedLinkBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  auto row = [&](const char* what, double gbps) {
    if (gbps > 0) {
      absl::PrintF("  %-46s %8.2f %8.3f\n", what, gbps,
                   gbps / r->pinned_copy_gbps);
    } else {
      absl::PrintF("  %-46s %8s %8s\n", what, "n/a", "-");
    }
  };
  absl::PrintF("  %-46s %8s %8s\n", "mechanism", "GB/s", "vs pinned");
  row("first-touch faults (streaming kernel)", r->fault_gbps);
  row("cudaMemPrefetchAsync -> device", r->prefetch_gbps);
  row("cudaMemPrefetchBatchAsync, 2 MiB chunks", r->batch_prefetch_gbps);
  row("cudaMemDiscardAndPrefetchBatchAsync (dead data)",
      r->discard_prefetch_gbps);
  row("cudaMemPrefetchAsync -> host (eviction)", r->evict_gbps);
  row("pinned cudaMemcpyAsync (ceiling)", r->pinned_copy_gbps);
  absl::PrintF("  %s; %s verified after the prefetches\n", r->device,
               FormatByteSize(r->verified_bytes));
  json = {{"device", r->device},
          {"bytes", r->bytes},
          {"fault_gbps", r->fault_gbps},
          {"prefetch_gbps", r->prefetch_gbps},
          {"batch_prefetch_gbps", r->batch_prefetch_gbps},
          {"discard_prefetch_gbps", r->discard_prefetch_gbps},
          {"evict_gbps", r->evict_gbps},
          {"pinned_copy_gbps", r->pinned_copy_gbps},
          {"batched", r->batched},
          {"verified_bytes", r->verified_bytes},
          {"samples", config.samples}};
  return absl::OkStatus();
}

}  // namespace

BenchCase LinkUmCase() {
  return {
      "link-um",
      "managed memory to the GPU by first-touch faults, cudaMemPrefetchAsync, "
      "batched and discarding prefetches, and back; --bench-size bytes",
      NeedsGpu, RunLinkUmCase};
}

}  // namespace strata
