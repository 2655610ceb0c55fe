// train_bench_report.cc: PrintModes and IoBoundSeconds
// (train_bench_report.h).
#include "bench/train_bench_report.h"

#include "absl/strings/str_format.h"
#include "train/compute/cpu/host_pool.h"
#include "train/run/metrics.h"

namespace strata::train {

// Seconds one step's NVMe bytes need at `rates`: reads and writes share the
// disk, so their times add.
double IoBoundSeconds(double read_bytes, double write_bytes,
                      const LinkRates& rates) {
  if (rates.nvme_read_gbps <= 0 || rates.nvme_write_gbps <= 0) return 0;
  return read_bytes / (rates.nvme_read_gbps * 1e9) +
         write_bytes / (rates.nvme_write_gbps * 1e9);
}

nlohmann::json PrintModes(const std::vector<ModeResult>& results,
                          const LinkRates& rates) {
  const double base = results[0].step_ms;
  // The CPU bound: a step cannot end before the process's CPU work per step
  // is done on the cores it may use (compute, and on a machine without a
  // GPU the simulated device's copies, checksums and I/O completions too).
  const int cores = HostThreads();
  // Per step: over the timed steps (the warm-up's left out), as step_ms.
  absl::PrintF(
      "%-10s %9s %9s %10s %12s %12s %8s %10s %11s %11s %11s %9s %12s\n", "mode",
      "step_ms", "ratio", "h2d_GB/st", "nvme_r_GB/st", "nvme_w_GB/st", "hit",
      "stall_frac", "nvme_r_GB/s", "nvme_w_GB/s", "io_bound_ms", "cpu_ms/st",
      "cpu_bound_ms");
  nlohmann::json json = nlohmann::json::array();
  for (const ModeResult& r : results) {
    const auto per_step = [&](Link l) {
      return static_cast<double>(r.timed_links[int(l)].bytes) /
             static_cast<double>(r.timed_steps);
    };
    const auto requests_per_step = [&](Link l) {
      return static_cast<double>(r.timed_links[int(l)].transfers) /
             static_cast<double>(r.timed_steps);
    };
    const auto gbps = [&](Link l) { return r.stats.links[int(l)].gbps(); };
    const double read = per_step(Link::kNvmeRead);
    const double write = per_step(Link::kNvmeWrite);
    const double io_bound = IoBoundSeconds(read, write, rates);
    const double stall_fraction =
        r.train_seconds > 0 ? r.stats.stall_seconds / r.train_seconds : 0;
    const double cpu_bound = r.cpu_seconds_per_step / cores;
    absl::PrintF(
        "%-10s %9.1f %9.3f %10.3f %12.3f %12.3f %8.3f %10.3f %11.2f %11.2f "
        "%11.1f %9.1f %12.1f\n",
        r.name, r.step_ms, r.step_ms / base, per_step(Link::kH2D) / 1e9,
        read / 1e9, write / 1e9, r.hit_rate, stall_fraction,
        gbps(Link::kNvmeRead), gbps(Link::kNvmeWrite), io_bound * 1e3,
        r.cpu_seconds_per_step * 1e3, cpu_bound * 1e3);
    json.push_back(
        {{"mode", r.name},
         {"step_ms_median", r.step_ms},
         {"step_seconds", r.step_ms / 1e3},
         {"ratio_vs_resident", r.step_ms / base},
         {"h2d_bytes", r.stats.links[int(Link::kH2D)].bytes},
         {"d2h_bytes", r.stats.links[int(Link::kD2H)].bytes},
         {"nvme_read_bytes", r.stats.links[int(Link::kNvmeRead)].bytes},
         {"nvme_write_bytes", r.stats.links[int(Link::kNvmeWrite)].bytes},
         {"nvme_read_bytes_per_step", read},
         {"nvme_read_floor_bytes_per_step",
          r.stats.scheduler.nvme_read_floor_bytes},
         {"nvme_read_vs_floor",
          r.stats.scheduler.nvme_read_floor_bytes > 0
              ? read /
                    static_cast<double>(r.stats.scheduler.nvme_read_floor_bytes)
              : 0.0},
         {"nvme_write_bytes_per_step", write},
         {"nvme_read_requests_per_step", requests_per_step(Link::kNvmeRead)},
         {"nvme_write_requests_per_step", requests_per_step(Link::kNvmeWrite)},
         {"nvme_read_gbps", gbps(Link::kNvmeRead)},
         {"nvme_write_gbps", gbps(Link::kNvmeWrite)},
         {"io_bound_seconds", io_bound},
         {"cpu_seconds_per_step", r.cpu_seconds_per_step},
         {"cpu_bound_seconds", cpu_bound},
         {"cores", cores},
         {"prefetch_hit_rate", r.hit_rate},
         {"stall_seconds", r.stats.stall_seconds},
         {"room_seconds", r.stats.room_seconds},
         {"stall_seconds_by_cause", StallJson(r.stats)},
         {"stall_fraction", stall_fraction},
         {"rolled_back_steps", r.rolled_back_steps},
         {"deferred_steps", r.deferred_steps},
         {"plan", PlanJson(r.stats.scheduler)}});
  }
  // What no schedule can avoid at these budgets (scheduler/nvme_floor.h).
  for (const ModeResult& r : results) {
    const auto floor =
        static_cast<double>(r.stats.scheduler.nvme_read_floor_bytes);
    if (floor == 0) continue;
    const double read =
        static_cast<double>(r.timed_links[int(Link::kNvmeRead)].bytes) /
        static_cast<double>(r.timed_steps);
    absl::PrintF(
        "%-10s NVMe read per step %.3f GB, %.2fx the floor of %.3f GB\n",
        r.name, read / 1e9, read / floor, floor / 1e9);
  }
  PrintPlans(results);
  return json;
}

// What each planned mode's plan said beside what the run measured.
void PrintPlans(const std::vector<ModeResult>& results) {
  for (const ModeResult& r : results) {
    const SchedulerStats& s = r.stats.scheduler;
    if (s.plans == 0) continue;
    const auto measured = [&](Link l) {
      return static_cast<double>(r.timed_links[int(l)].bytes) /
             static_cast<double>(r.timed_steps) / 1e9;
    };
    const auto planned = [&](Link l) {
      return static_cast<double>(s.planned_link_bytes[int(l)]) / 1e9;
    };
    absl::PrintF(
        "%-10s plan: NVMe read %.3f GB/step (measured %.3f), write %.3f "
        "(measured %.3f), write floor %.3f; step %.1f ms predicted "
        "(measured %.1f), bound %.1f ms; %d plans in %.1f ms\n",
        r.name, planned(Link::kNvmeRead), measured(Link::kNvmeRead),
        planned(Link::kNvmeWrite), measured(Link::kNvmeWrite),
        static_cast<double>(s.nvme_write_floor_bytes) / 1e9,
        s.plan_predicted_seconds * 1e3, r.step_ms, s.plan_bound_seconds * 1e3,
        s.plans, s.planning_seconds * 1e3);
  }
}

}  // namespace strata::train
