// prefetch_planner.cc: PlanPrefetch, trace order within a byte window, each
// load started as late as its link allows.
#include "scheduler/prefetch_planner.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "strata/stats.h"

namespace strata {
namespace {

// A load in the window to plan.
struct Queued {
  PrefetchRequest request;
  int link = 0;
  double need_seconds = 0;      // when its access comes
  double transfer_seconds = 0;  // how long it takes on its link
};

// What the window holds: the loads to consider, nearest first, each once,
// and per link the seconds of loads already in flight on it.
struct Window {
  std::vector<Queued> loads;
  absl::flat_hash_map<int, double> busy_seconds;
};

Window WindowLoads(absl::Span<const AccessEvent> upcoming,
                   const uint64_t (&lookahead_bytes)[kNumTiers],
                   PrefetchLookup lookup, absl::Span<const double> seconds) {
  Window w;
  uint64_t window[kNumTiers] = {0, 0, 0};
  bool full[kNumTiers] = {false, false, false};
  // Tensors a predicted access writes before the one being considered, and
  // on which tier.
  absl::flat_hash_map<TensorId, Tier> written;
  // Tensors a predicted device access uses before the one being considered.
  absl::flat_hash_set<TensorId> on_device_first;
  absl::flat_hash_set<std::pair<uint64_t, Tier>> seen;
  for (size_t i = 0; i < upcoming.size(); ++i) {
    const AccessEvent& next = upcoming[i];
    const int t = static_cast<int>(next.tier);
    const auto earlier_write = written.find(next.id);
    const bool stale_by_use =
        earlier_write != written.end() && earlier_write->second != next.tier;
    const bool device_first = on_device_first.contains(next.id);
    if (next.tier == Tier::kDevice) on_device_first.insert(next.id);
    if (next.access != Access::kRead) written[next.id] = next.tier;
    if (next.tier == Tier::kNvme || full[t]) continue;
    const std::optional<PrefetchFacts> facts = lookup(next.id, next.tier);
    if (!facts.has_value()) continue;
    if (window[t] + facts->bytes > lookahead_bytes[t]) {
      full[t] = true;  // nearer accesses first: nothing later on this tier
      continue;
    }
    window[t] += facts->bytes;
    const bool plan =
        next.access != Access::kOverwrite && facts->has_contents &&
        !stale_by_use &&
        !(device_first && next.tier == Tier::kHost &&
          facts->link == static_cast<int>(Link::kNvmeRead)) &&
        static_cast<int>(next.tier) <= static_cast<int>(facts->home) &&
        facts->loadable;
    if (!(plan || facts->in_flight) ||
        !seen.insert({next.id.value, next.tier}).second) {
      continue;
    }
    if (facts->in_flight) {
      w.busy_seconds[facts->link] += facts->transfer_seconds;
      continue;
    }
    w.loads.push_back({.request = {next.id, next.tier},
                       .link = facts->link,
                       .need_seconds = seconds.empty() ? 0 : seconds[i],
                       .transfer_seconds = facts->transfer_seconds});
  }
  return w;
}

}  // namespace

std::vector<PrefetchRequest> PlanPrefetch(
    absl::Span<const AccessEvent> upcoming,
    const uint64_t (&lookahead_bytes)[kNumTiers], PrefetchLookup lookup,
    absl::Span<const double> seconds) {
  const Window w = WindowLoads(upcoming, lookahead_bytes, lookup, seconds);
  const std::vector<Queued>& loads = w.loads;
  // Latest starts, from the furthest load back: a load must end before its
  // access and before the next load on its link has to start.
  std::vector<double> start_by(loads.size());
  absl::flat_hash_map<int, double> next_start;
  for (size_t i = loads.size(); i-- > 0;) {
    auto [it, _] = next_start.try_emplace(
        loads[i].link, std::numeric_limits<double>::infinity());
    it->second =
        std::min(it->second, loads[i].need_seconds) - loads[i].transfer_seconds;
    start_by[i] = it->second;
  }
  // The next access is the next chance to plan: what must start before it
  // starts now, and the loads in flight on a link go first.
  const double next_chance = seconds.empty() ? 0 : seconds[0];
  std::vector<PrefetchRequest> plan;
  for (size_t i = 0; i < loads.size(); ++i) {
    const auto busy = w.busy_seconds.find(loads[i].link);
    const double ahead = busy == w.busy_seconds.end() ? 0 : busy->second;
    if (start_by[i] - ahead <= next_chance) plan.push_back(loads[i].request);
  }
  return plan;
}

}  // namespace strata
