// eviction.cc: PickVictim, Belady over the predicted future or LRU.
#include "scheduler/eviction.h"

#include <tuple>

namespace strata {
namespace {

// Larger is a better victim.
std::tuple<bool, uint64_t, bool, uint64_t> VictimKey(
    const CopyView& copy, const EvictionQuery& query) {
  const uint64_t distance =
      query.policy == EvictionPolicy::kBelady ? copy.next_use : 0;
  return std::make_tuple(copy.bytes >= query.keep_small_below, distance,
                         !copy.dirty, ~copy.last_use);
}

}  // namespace

bool IsEvictable(const CopyView& copy, const EvictionQuery& query) {
  if (copy.tier != query.tier || copy.state != CopyState::kValid ||
      copy.leased || copy.awaited || copy.transfer_pinned || copy.is_home) {
    return false;
  }
  // A dirty copy needs its home copy free to take a write-back; if a
  // transfer is filling it, leave this copy for now.
  if (copy.dirty && copy.has_contents &&
      copy.home.state != CopyState::kAbsent) {
    return false;
  }
  if (query.protect_within > 0 && copy.next_use < query.protect_within) {
    return false;
  }
  // Unified memory: a host copy whose pages a device copy is using (being
  // filled, leased or migrating back) stays.
  const PeerView& device = copy.device;
  if (query.unified && query.tier == Tier::kHost &&
      device.state != CopyState::kAbsent &&
      (device.state != CopyState::kValid || device.leased ||
       device.transfer_pinned)) {
    return false;
  }
  return true;
}

bool BetterVictim(const CopyView& a, const CopyView& b,
                  const EvictionQuery& query) {
  return VictimKey(a, query) > VictimKey(b, query);
}

std::optional<size_t> PickVictim(absl::Span<const CopyView> copies,
                                 const EvictionQuery& query) {
  std::optional<size_t> best;
  for (size_t i = 0; i < copies.size(); ++i) {
    if (!IsEvictable(copies[i], query)) continue;
    if (!best.has_value() || BetterVictim(copies[i], copies[*best], query)) {
      best = i;
    }
  }
  return best;
}

}  // namespace strata
