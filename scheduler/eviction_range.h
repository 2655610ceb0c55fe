// eviction_range.h: the victims that make one contiguous range on a
// fragmented tier.
//
// A tier arena can have room enough in total and still no free range for a
// request: then evicting copies one at a time by next use frees extents
// scattered over the arena, and a 2 MiB request on a host tier of 256 KiB
// copies can flush the whole tier before two freed extents happen to touch
// (measured: ~100 host copies written back per GPT step). PickVictimRange
// chooses instead the window of `want` bytes whose copies are all evictable
// (IsEvictable) and whose soonest next use is furthest away (kBelady; kLru:
// whose most recent use is oldest), then with the fewest dirty bytes, then
// the fewest bytes evicted, then the lowest offset. Space that is neither a
// free range nor a copy in `copies` is a wall a window cannot cross.
//
// Thread safety: a pure function.
#ifndef STRATA_SCHEDULER_EVICTION_RANGE_H_
#define STRATA_SCHEDULER_EVICTION_RANGE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/eviction.h"
#include "scheduler/snapshot.h"

namespace strata {

// A free range of a tier arena, in bytes from its base.
struct FreeRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// The indices in `copies` (copies on query.tier, each with its extent's
// offset and bytes) to evict so that one free range of at least `want`
// bytes forms, together with `free` (the tier's free ranges); empty when a
// free range already fits; nullopt when no window of evictable copies does.
std::optional<std::vector<size_t>> PickVictimRange(
    absl::Span<const CopyView> copies, absl::Span<const FreeRange> free,
    uint64_t want, const EvictionQuery& query);

}  // namespace strata

#endif  // STRATA_SCHEDULER_EVICTION_RANGE_H_
