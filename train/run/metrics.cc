// metrics.cc: see metrics.h.
#include "train/run/metrics.h"

#include <algorithm>

namespace strata::train {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double PrefetchHitRate(const Stats& s) {
  const double needed = double(s.prefetch.hit) + s.stalled_acquires;
  return needed > 0 ? s.prefetch.hit / needed : 1.0;
}

nlohmann::json StallJson(const Stats& s) {
  const double room = std::min(s.room_seconds, s.stall_seconds);
  return {{"room", room}, {"load", s.stall_seconds - room}};
}

nlohmann::json PlanJson(const SchedulerStats& s) {
  if (s.plans == 0) return nullptr;
  const auto link = [&](Link l) { return s.planned_link_bytes[int(l)]; };
  return {{"plans", s.plans},
          {"planning_seconds", s.planning_seconds},
          {"h2d_bytes_per_step", link(Link::kH2D)},
          {"d2h_bytes_per_step", link(Link::kD2H)},
          {"nvme_read_bytes_per_step", link(Link::kNvmeRead)},
          {"nvme_write_bytes_per_step", link(Link::kNvmeWrite)},
          {"nvme_write_floor_bytes_per_step", s.nvme_write_floor_bytes},
          {"bound_seconds", s.plan_bound_seconds},
          {"predicted_step_seconds", s.plan_predicted_seconds}};
}

}  // namespace strata::train
