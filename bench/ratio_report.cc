// ratio_report.cc: store_roundtrip_bench's recording reporter and ratio
// table (see ratio_report.h).
#include "bench/ratio_report.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "bench/raw_uring_baseline.h"
#include "strata/options.h"

namespace strata {
namespace {

constexpr uint64_t kKiB = 1024;

// Each store case and its baseline (store_roundtrip_bench.cc says why); the
// cases that verify a read's checksum also next to the raw read that hashes
// what it read (`verified`, null for the others).
struct Pairing {
  const char* store;
  const char* baseline;
  const char* verified = nullptr;
};

constexpr Pairing kPairings[] = {
    {"store_h2d", "memcpy"},
    {"store_d2h", "memcpy"},
    {"store_dev_rt", "memcpy_rt"},
    {"store_nvme_write", "uring_write"},
    {"store_nvme_read", "uring_read", "uring_read_xxh3"},
    {"store_nvme_rmw", "uring_write_read"},
    {"store_nvme_to_dev", "uring_read", "uring_read_xxh3"},
};

// `v` with `digits` decimals, or "-" when it is not positive (not run).
std::string OrDash(double v, int digits) {
  return v > 0 ? absl::StrFormat("%.*f", digits, v) : "-";
}

bool IsUring(const std::string& name) { return name.rfind("uring_", 0) == 0; }

// The size a baseline runs at for a store case of `size` bytes.
uint64_t BaselineSize(const std::string& baseline, uint64_t size) {
  return IsUring(baseline) ? UringBaselineSize(size) : size;
}

std::string SizeName(uint64_t n) {
  if (n % kMiB == 0) return absl::StrFormat("%d MiB", n / kMiB);
  if (n > kMiB) return absl::StrFormat("1 MiB+%d", n - kMiB);
  if (n % kKiB == 0) return absl::StrFormat("%d KiB", n / kKiB);
  return absl::StrFormat("%d B", n);
}

}  // namespace

void RecordingReporter::ReportRuns(const std::vector<Run>& runs) {
  ConsoleReporter::ReportRuns(runs);
  for (const Run& run : runs) {
    const bool median =
        run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
    if (run.error_occurred || (run.run_type != Run::RT_Iteration && !median)) {
      continue;
    }
    auto it = run.counters.find("bytes_per_second");
    if (it == run.counters.end()) continue;
    const std::pair<std::string, uint64_t> key = {
        run.run_name.function_name,
        std::strtoull(run.run_name.args.c_str(), nullptr, 10)};
    if (!median && medians_.contains(key)) continue;
    if (median) medians_.insert(key);
    results_[key] = it->second.value;
  }
}

double RecordingReporter::Get(const std::string& name, uint64_t size) const {
  auto it = results_.find({name, size});
  return it == results_.end() ? -1 : it->second;
}

nlohmann::json PrintRatioTable(const RecordingReporter& reporter,
                               const std::vector<uint64_t>& sizes) {
  nlohmann::json rows = nlohmann::json::array();
  std::printf(
      "\nstore round trip vs baseline (GB/s = 1e9 bytes/s; "
      "verified: the raw read + XXH3 of what it read)\n");
  std::printf("%-18s %-11s %10s  %-28s %10s %8s %12s\n", "case", "size",
              "store GB/s", "baseline", "base GB/s", "ratio", "vs verified");
  for (const Pairing& p : kPairings) {
    for (uint64_t size : sizes) {
      const double store = reporter.Get(p.store, size);
      if (store < 0) continue;  // filtered out or failed
      const uint64_t base_size = BaselineSize(p.baseline, size);
      const double base = reporter.Get(p.baseline, base_size);
      const double verified =
          p.verified ? reporter.Get(p.verified, base_size) : -1;
      const double ratio = base > 0 ? store / base : 0;
      const double to_verified = verified > 0 ? store / verified : 0;
      std::printf("%-18s %-11s %10.2f  %-28s %10s %8s %12s\n", p.store,
                  SizeName(size).c_str(), store / 1e9,
                  absl::StrFormat("%s/%d", p.baseline, base_size).c_str(),
                  OrDash(base / 1e9, 2).c_str(), OrDash(ratio, 3).c_str(),
                  OrDash(to_verified, 3).c_str());
      nlohmann::json row = {{"case", p.store},
                            {"size_bytes", size},
                            {"store_gbps", store / 1e9},
                            {"baseline", p.baseline},
                            {"baseline_size_bytes", base_size}};
      row["baseline_gbps"] = base > 0 ? nlohmann::json(base / 1e9) : nullptr;
      row["ratio"] = base > 0 ? nlohmann::json(ratio) : nullptr;
      if (p.verified != nullptr) {
        row["verified_baseline"] = p.verified;
        row["verified_baseline_gbps"] =
            verified > 0 ? nlohmann::json(verified / 1e9) : nullptr;
        row["ratio_to_verified"] =
            verified > 0 ? nlohmann::json(to_verified) : nullptr;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace strata
