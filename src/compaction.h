// compaction.h: PlanCompaction, which copies to move within one tier's
// arena so that a request finds a contiguous range when the tier has the
// bytes but not in one piece.
//
// Why: the residency plan (scheduler/residency_plan.h) counts a tier's
// bytes, the arena needs ranges. With tensors of mixed sizes and lifetimes
// the free space splits, and a load the plan made room for finds none; the
// reactive path would then evict a copy the plan keeps (an NVMe write, a
// read later). Moving idle copies within the tier costs a memory copy
// instead (host memcpy, device-to-device copy), the way a compacting heap
// or PyTorch's expandable segments answer fragmentation.
//
// The choice: the window of `bytes` (aligned to the start of a free range or
// movable extent, spanning no immovable byte) whose movable extents hold the
// fewest bytes; each of those goes to a free range outside the window by
// its own placement (so compaction keeps large state and short-lived copies
// apart, as allocation does), largest first. Linear in the arena's ranges.
//
// Thread safety: a pure function of its arguments.
#ifndef STRATA_SRC_COMPACTION_H_
#define STRATA_SRC_COMPACTION_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "src/extent_allocator.h"

namespace strata {

// An allocated extent that may move, and where in the arena it belongs
// (the store's placement class: large model state high, the rest low).
struct MovableExtent {
  Extent extent;
  Placement placement = Placement::kBestFit;
};

struct ExtentMove {
  Extent from;  // an allocated extent of the arena
  Extent to;    // a free range of the arena, as large as `from`
};

struct Compaction {
  Extent window;  // free once the moves are done: it holds the request
  std::vector<ExtentMove> moves;
  uint64_t moved_bytes = 0;
};

// Moves that free a range of `bytes` (rounded to the arena's alignment) in
// `arena`, moving only extents of `movable` (allocated extents of the arena,
// any order, none twice). nullopt when the arena already has such a range, has
// too few free bytes, or no window of movable and free ranges can be cleared
// into the free space outside it.
std::optional<Compaction> PlanCompaction(const ExtentAllocator& arena,
                                         std::vector<MovableExtent> movable,
                                         uint64_t bytes);

}  // namespace strata

#endif  // STRATA_SRC_COMPACTION_H_
