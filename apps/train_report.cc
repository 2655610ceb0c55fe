// train_report.cc: the store's part of a training report (see
// train_report.h).
#include "apps/train_report.h"

#include <cerrno>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "apps/stats_json.h"
#include "base/byte_size.h"
#include "train/model/lease_group.h"
#include "train/run/metrics.h"

namespace strata {

nlohmann::json BytesPerParamStepJson(
    const std::array<uint64_t, kNumLinks>& link_bytes, int64_t steps,
    int64_t parameters) {
  nlohmann::json j;
  for (int i = 0; i < kNumLinks; ++i) {
    const double per = steps > 0 && parameters > 0
                           ? static_cast<double>(link_bytes[i]) /
                                 (static_cast<double>(steps) * parameters)
                           : 0.0;
    j[std::string(LinkName(static_cast<Link>(i))) + "_bytes_per_param_step"] =
        per;
  }
  return j;
}

nlohmann::json StoreReportJson(const Stats& st) {
  const auto& dev = st.tiers[int(Tier::kDevice)];
  const auto& host = st.tiers[int(Tier::kHost)];
  const auto& nvme = st.tiers[int(Tier::kNvme)];
  const auto link = [&](Link l) { return st.links[int(l)].bytes; };
  return {
      {"device_budget_bytes", dev.capacity_bytes},
      {"peak_device_bytes", dev.peak_used_bytes},
      {"host_budget_bytes", host.capacity_bytes},
      {"peak_host_bytes", host.peak_used_bytes},
      {"nvme_budget_bytes", nvme.capacity_bytes},
      {"peak_nvme_bytes", nvme.peak_used_bytes},
      {"h2d_bytes", link(Link::kH2D)},
      {"d2h_bytes", link(Link::kD2H)},
      {"nvme_read_bytes", link(Link::kNvmeRead)},
      {"nvme_write_bytes", link(Link::kNvmeWrite)},
      // Achieved GB/s while each link had a transfer in flight.
      {"link_gbps",
       {{"h2d", st.links[int(Link::kH2D)].gbps()},
        {"d2h", st.links[int(Link::kD2H)].gbps()},
        {"nvme_read", st.links[int(Link::kNvmeRead)].gbps()},
        {"nvme_write", st.links[int(Link::kNvmeWrite)].gbps()}}},
      // The fewest bytes a step must read from NVMe at these budgets (the
      // largest step shape's), beside nvme_read_bytes_per_param_step.
      {"nvme_read_floor_bytes_per_step", st.scheduler.nvme_read_floor_bytes},
      // The residency plan of the step: what it puts on each link, its
      // bound and the step time it predicts (null: no plan ran).
      {"plan", train::PlanJson(st.scheduler)},
      {"prefetch_hit_rate", train::PrefetchHitRate(st)},
      {"prefetch",
       {{"issued", st.prefetch.issued},
        {"hit", st.prefetch.hit},
        {"late", st.prefetch.late},
        {"wasted", st.prefetch.wasted},
        {"failed", st.prefetch.failed}}},
      {"acquires", st.acquires},
      // Dirty copies written to a slower tier (evictions that had to write).
      {"write_backs", st.write_backs},
      {"stalled_acquires", st.stalled_acquires},
      // Device acquires whose host -> device copy the lease's stream waited
      // for, not the CPU (0 on the simulated device).
      {"queued_loads", st.queued_loads},
      {"stall_seconds", st.stall_seconds},
      {"room_seconds", st.room_seconds},
      {"stall_seconds_by_cause", train::StallJson(st)},
      // Copies moved within a tier to join split free space (compaction),
      // per tier: device, host.
      {"compactions", {st.tiers[0].compactions, st.tiers[1].compactions}},
      {"relocated_bytes",
       {st.tiers[0].relocated_bytes, st.tiers[1].relocated_bytes}},
      {"lease_group_retries", train::LeaseGroup::retries()},
      // Transient NVMe errors survived: requests run again, and reads whose
      // checksum did not match that were read once more.
      {"io_retries", st.io_retries},
      {"checksum_rereads", st.checksum_rereads},
      {"checksum_failures", st.checksum_failures},
      {"device", st.device_backend},
      {"device_memory", st.device_memory},
      {"unified", UnifiedJson(st.unified)},
      {"io_engine", st.io_engine},
  };
}

std::string TimesFormat(double ratio) {
  return ratio >= 1 ? absl::StrFormat("%.1fx", ratio)
                    : absl::StrFormat("%.2gx", ratio);
}

std::string ThreadsFormat(int threads) {
  return absl::StrFormat("%d thread%s", threads, threads == 1 ? "" : "s");
}

nlohmann::json FailedRunJson(const absl::Status& error, const Stats& st,
                             absl::Span<const double> losses) {
  nlohmann::json report = {
      {"error", error.ToString()},
      {"steps", losses.size()},
      {"losses", std::vector<double>(losses.begin(), losses.end())},
  };
  report.update(StoreReportJson(st));
  return report;
}

absl::Status WriteReportJson(const std::string& path,
                             const nlohmann::json& report) {
  std::ofstream out(path);
  out << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";
  out.close();
  if (!out) {
    return absl::ErrnoToStatus(errno,
                               absl::StrFormat("cannot write --json=%s", path));
  }
  return absl::OkStatus();
}

void PrintNvmeFloorRow(const Stats& st,
                       const std::array<uint64_t, kNumLinks>& link_bytes,
                       int64_t steps) {
  const uint64_t floor = st.scheduler.nvme_read_floor_bytes;
  if (floor == 0 || steps <= 0) return;
  const double read =
      static_cast<double>(link_bytes[int(Link::kNvmeRead)]) / steps;
  absl::PrintF(
      "%-22s %.1f MB (the fewest these budgets allow: %.1f MB; %.2fx)\n",
      "nvme read per step", read / 1e6, floor / 1e6, read / floor);
}

void PrintStoreRows(const Stats& st, uint64_t state_bytes) {
  const auto& dev = st.tiers[int(Tier::kDevice)];
  const auto& host = st.tiers[int(Tier::kHost)];
  const auto& nvme = st.tiers[int(Tier::kNvme)];
  const auto gb = [&](Link l) { return st.links[int(l)].bytes / 1e9; };
  absl::PrintF("%-22s %s (%s device budget)\n", "model state",
               FormatByteSize(state_bytes),
               TimesFormat(double(state_bytes) / dev.capacity_bytes));
  absl::PrintF("%-22s %s of %s\n", "peak device",
               FormatByteSize(dev.peak_used_bytes),
               FormatByteSize(dev.capacity_bytes));
  absl::PrintF("%-22s %s of %s\n", "peak host",
               FormatByteSize(host.peak_used_bytes),
               FormatByteSize(host.capacity_bytes));
  absl::PrintF("%-22s %s of %s\n", "peak nvme",
               FormatByteSize(nvme.peak_used_bytes),
               FormatByteSize(nvme.capacity_bytes));
  absl::PrintF("%-22s h2d %.2f  d2h %.2f  nvme read %.2f  nvme write %.2f\n",
               "moved (GB)", gb(Link::kH2D), gb(Link::kD2H),
               gb(Link::kNvmeRead), gb(Link::kNvmeWrite));
  absl::PrintF("%-22s %.3f\n", "prefetch hit rate", train::PrefetchHitRate(st));
  // Of the stall, the part that making room cost (a victim written back
  // while the acquire waited), not the acquire's own load.
  if (st.room_seconds > 0) {
    absl::PrintF("%-22s %.2f s (%.2f s making room: evictions written back)\n",
                 "stall", st.stall_seconds, st.room_seconds);
  } else {
    absl::PrintF("%-22s %.2f s\n", "stall", st.stall_seconds);
  }
  if (st.io_retries > 0 || st.checksum_rereads > 0) {
    absl::PrintF(
        "%-22s %d NVMe requests retried, %d reads re-read after a "
        "checksum mismatch\n",
        "I/O faults survived", st.io_retries, st.checksum_rereads);
  }
  if (st.device_memory != "copies") {
    absl::PrintF(
        "%-22s %s: %d prefetches, %d evictions, %d discards, %d read-mostly, "
        "%d faults\n",
        "unified memory", st.device_memory, st.unified.prefetches,
        st.unified.evictions, st.unified.discards, st.unified.read_mostly,
        st.unified.faults);
  }
}

nlohmann::json PrecisionJson(train::Precision precision,
                             train::Rounding rounding, int64_t skipped_steps,
                             const train::DynamicLossScale* loss_scale) {
  nlohmann::json j = {{"precision", train::PrecisionName(precision)},
                      {"rounding", train::RoundingName(rounding)},
                      {"skipped_steps", skipped_steps}};
  if (loss_scale != nullptr) {
    nlohmann::json history = nlohmann::json::array();
    for (const train::LossScaleChange& c : loss_scale->history()) {
      history.push_back({{"step", c.step}, {"scale", c.scale}});
    }
    j["loss_scale"] = loss_scale->scale();
    j["loss_scale_history"] = history;
  }
  return j;
}

void PrintPrecisionRow(train::Precision precision, train::Rounding rounding,
                       int64_t skipped_steps,
                       const train::DynamicLossScale* loss_scale) {
  if (precision == train::Precision::kFp32) return;
  absl::PrintF("%-22s %s (rounding %s; skipped steps: %d%s)\n", "precision",
               train::PrecisionName(precision), train::RoundingName(rounding),
               skipped_steps,
               loss_scale
                   ? absl::StrFormat(", loss scale %.0f", loss_scale->scale())
                   : "");
}

}  // namespace strata
