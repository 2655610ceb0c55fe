// eviction.h: the eviction policy — which copy on a full tier to evict next.
//
// Candidates are valid copies that are not leased, not read by a transfer,
// not the tensor's home copy (its space is reserved for life), and not dirty
// while their home copy is being filled (the write-back would have nowhere to
// go yet). A query may protect copies predicted to be used within
// `protect_within` accesses: a prefetch never evicts what is needed before
// the tensor it fetches. In unified memory a host copy whose pages the device
// copy is using (being filled, leased, read by a migration) stays.
//
// Among candidates, kBelady takes the copy whose next use is furthest away
// (no predicted use counts as furthest), clean before dirty at equal
// distance, then the least recently used; kLru ignores the prediction: clean
// before dirty, then the least recently used. Equal keys keep the earlier
// copy in the snapshot. With `keep_small_below`, copies smaller than that are
// taken only when no larger copy is a candidate: on a tier whose evictions
// go to NVMe, a small copy's write-back and re-read each cost a request's
// latency for almost no room (on this machine a 4 KiB write takes ~50 us at
// any queue depth, a 64 KiB one ~100 us: `strata bench -t nvme-sweep`).
//
// Thread safety: a pure function.
#ifndef STRATA_SCHEDULER_EVICTION_H_
#define STRATA_SCHEDULER_EVICTION_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/types/span.h"
#include "scheduler/snapshot.h"
#include "strata/options.h"
#include "strata/tensor.h"

namespace strata {

struct EvictionQuery {
  Tier tier = Tier::kDevice;  // the tier that needs room
  EvictionPolicy policy = EvictionPolicy::kBelady;
  // Copies whose next use is closer than this are not candidates; 0 protects
  // nothing.
  uint64_t protect_within = 0;
  bool unified = false;  // unified memory: device copies are host pages
  // Copies of fewer bytes are evicted last (see above); 0: no preference.
  uint64_t keep_small_below = 0;
};

// The index in `copies` of the copy to evict from `query.tier`, or nullopt
// when no copy may be evicted. Copies on other tiers are ignored.
std::optional<size_t> PickVictim(absl::Span<const CopyView> copies,
                                 const EvictionQuery& query);

// Whether `copy` may be evicted for `query` (the candidate rules above).
bool IsEvictable(const CopyView& copy, const EvictionQuery& query);

// Whether PickVictim would take `a` before `b` (both candidates): the order
// above, with each copy's `next_use` as given.
bool BetterVictim(const CopyView& a, const CopyView& b,
                  const EvictionQuery& query);

}  // namespace strata

#endif  // STRATA_SCHEDULER_EVICTION_H_
