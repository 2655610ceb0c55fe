// prefetch_planner.cc: PlanPrefetch, trace order within a byte window.
#include "scheduler/prefetch_planner.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace strata {

std::vector<PrefetchRequest> PlanPrefetch(
    absl::Span<const AccessEvent> upcoming,
    const uint64_t (&lookahead_bytes)[kNumTiers], PrefetchLookup lookup) {
  std::vector<PrefetchRequest> plan;
  uint64_t window[kNumTiers] = {0, 0, 0};
  bool full[kNumTiers] = {false, false, false};
  // Tensors a predicted access writes before the one being considered, and
  // on which tier.
  absl::flat_hash_map<TensorId, Tier> written;
  absl::flat_hash_set<std::pair<uint64_t, Tier>> planned;
  for (const AccessEvent& next : upcoming) {
    const int t = static_cast<int>(next.tier);
    const auto earlier_write = written.find(next.id);
    const bool stale_by_use =
        earlier_write != written.end() && earlier_write->second != next.tier;
    if (next.access != Access::kRead) written[next.id] = next.tier;
    if (next.tier == Tier::kNvme || full[t]) continue;
    const std::optional<PrefetchFacts> facts = lookup(next.id, next.tier);
    if (!facts.has_value()) continue;
    if (window[t] + facts->bytes > lookahead_bytes[t]) {
      full[t] = true;  // nearer accesses first: nothing later on this tier
      continue;
    }
    window[t] += facts->bytes;
    if (next.access == Access::kOverwrite || !facts->has_contents ||
        stale_by_use ||
        static_cast<int>(next.tier) > static_cast<int>(facts->home) ||
        !facts->loadable) {
      continue;
    }
    if (planned.insert({next.id.value, next.tier}).second) {
      plan.push_back({next.id, next.tier});
    }
  }
  return plan;
}

}  // namespace strata
