#include "apps/info_command.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "apps/cli/config_file.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/output_path.h"
#include "apps/cli/store_flags.h"
#include "apps/stats_json.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata {
namespace {

// An odd size, so the O_DIRECT rounding is exercised too.
constexpr uint64_t kRoundTripBytes = 4 * kMiB + 3;
// What each tier needs for it (the tensor and its allocation granules).
constexpr uint64_t kRoundTripMinBudget = 5 * kMiB;

std::vector<unsigned char> TestPattern(uint64_t n) {
  std::vector<unsigned char> v(n);
  uint32_t x = 2463534242u;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<unsigned char>(x);
  }
  return v;
}

// host -> NVMe (or host only) -> device -> host, comparing the bytes at the
// end. Returns the seconds it took.
absl::StatusOr<double> RoundTrip(Store& store, bool nvme) {
  const absl::Time start = absl::Now();
  STRATA_ASSIGN_OR_RETURN(
      TensorId id, store.Create({.name = "info-round-trip",
                                 .size_bytes = kRoundTripBytes,
                                 .home = nvme ? Tier::kNvme : Tier::kHost}));
  const std::vector<unsigned char> in = TestPattern(kRoundTripBytes);
  STRATA_RETURN_IF_ERROR(store.Write(id, in.data(), in.size()));
  if (nvme) STRATA_RETURN_IF_ERROR(store.Evict(id, Tier::kNvme));
  {  // Loads from NVMe through the bounce chunks; the device copy is dirty.
    STRATA_ASSIGN_OR_RETURN(Lease lease,
                            store.Acquire(id, Tier::kDevice, Access::kWrite));
    STRATA_RETURN_IF_ERROR(lease.Release());
  }
  std::vector<unsigned char> out(kRoundTripBytes);
  STRATA_RETURN_IF_ERROR(store.Read(id, out.data(), out.size()));  // D2H
  STRATA_RETURN_IF_ERROR(store.Destroy(id));
  if (out != in) {
    return absl::DataLossError("round trip returned different bytes");
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

nlohmann::json StatsJson(const Stats& s) {
  nlohmann::json j;
  for (int t = 0; t < kNumTiers; ++t) {
    j["tiers"][std::string(TierName(static_cast<Tier>(t)))] = {
        {"capacity_bytes", s.tiers[t].capacity_bytes},
        {"peak_used_bytes", s.tiers[t].peak_used_bytes}};
  }
  for (int l = 0; l < kNumLinks; ++l) {
    j["links"][std::string(LinkName(static_cast<Link>(l)))] = {
        {"bytes", s.links[l].bytes}, {"transfers", s.links[l].transfers}};
  }
  j["device_backend"] = s.device_backend;
  j["device_memory"] = s.device_memory;
  j["unified"] = UnifiedJson(s.unified);
  j["io_engine"] = s.io_engine;
  return j;
}

}  // namespace

int RunInfo(const std::string& json_path) {
  absl::StatusOr<StoreOptions> options = StoreOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "strata info: %s\n",
                 ErrorText(options.status()).c_str());
    return 2;
  }
  if (absl::Status w = CheckWritable(json_path, "--json"); !w.ok()) {
    std::fprintf(stderr, "strata info: %s\n", ErrorText(w).c_str());
    return 2;
  }
  // Bad input, refused before the store is opened (exit 2): the round trip
  // needs a tensor's room on every tier it crosses.
  const bool nvme = !options->nvme.directories.empty();
  for (const auto& [flag, budget] :
       {std::pair{"--device-budget", options->device.budget_bytes},
        std::pair{"--host-budget", options->host.budget_bytes},
        std::pair{"--nvme-budget",
                  nvme ? options->nvme.budget_bytes : kRoundTripMinBudget}}) {
    if (budget < kRoundTripMinBudget) {
      std::fprintf(stderr,
                   "strata info: %s=%s: the round trip moves a %s tensor "
                   "through every tier; give each budget at least %s\n",
                   flag, FormatByteSize(budget).c_str(),
                   FormatByteSize(kRoundTripBytes).c_str(),
                   FormatByteSize(kRoundTripMinBudget).c_str());
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(*options);
  if (!store.ok()) {
    std::fprintf(stderr, "strata info: cannot open the store: %s\n",
                 ErrorText(store.status()).c_str());
    return ExitCodeBeforeRun(store.status());
  }
  std::printf("%s", (*store)->DescribeTiers().c_str());
  absl::StatusOr<double> seconds = RoundTrip(**store, nvme);
  if (seconds.ok()) {
    std::printf(
        "round trip: %s host -> %sdevice -> host, bytes match (%.1f ms)\n",
        FormatByteSize(kRoundTripBytes).c_str(), nvme ? "nvme -> " : "",
        *seconds * 1e3);
  } else {
    std::printf("round trip: FAILED: %s\n",
                ErrorText(seconds.status()).c_str());
  }
  if (!json_path.empty()) {
    nlohmann::json report = StatsJson((*store)->GetStats());
    report["tiers_description"] = (*store)->DescribeTiers();
    report["options"] = {
        {"device_budget_bytes", options->device.budget_bytes},
        {"host_budget_bytes", options->host.budget_bytes},
        {"nvme_directories", options->nvme.directories},
        {"nvme_budget_bytes", options->nvme.budget_bytes},
        {"queue_depth", options->nvme.queue_depth},
        {"block_size_bytes", options->nvme.block_size_bytes},
        {"memory", DeviceMemoryName(options->device.memory)},
        {"unified_hints", options->device.unified_hints},
        {"sim_memory_bytes", options->device.sim_memory_bytes}};
    report["config"] = EffectiveConfig(*FindCommand("info"));
    report["round_trip"] = {{"ok", seconds.ok()},
                            {"bytes", kRoundTripBytes},
                            {"seconds", seconds.ok() ? *seconds : 0.0}};
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out.flush()) {
      std::fprintf(stderr, "strata info: writing %s failed\n",
                   json_path.c_str());
      return 1;
    }
  }
  return seconds.ok() ? 0 : 1;
}

}  // namespace strata
