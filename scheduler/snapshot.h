// snapshot.h: the store's state as the scheduler's policies see it.
//
// The store (src/) owns tensors, copies and leases; the scheduler's policies
// (eviction.h, prefetch_planner.h) are pure functions over a snapshot of that
// state which the store builds under its mutex, so a policy never reaches
// into the store and is unit-tested on hand-built snapshots. The per-tier
// copy states are defined here and used by the store itself.
//
// Thread safety: plain values; no synchronisation.
#ifndef STRATA_SCHEDULER_SNAPSHOT_H_
#define STRATA_SCHEDULER_SNAPSHOT_H_

#include <cstdint>
#include <limits>

#include "strata/tensor.h"

namespace strata {

// Per tier a copy is absent, loading (a transfer is filling it), valid, or
// evicting (a write-back is reading it before it is freed).
enum class CopyState : uint8_t { kAbsent, kLoading, kValid, kEvicting };

// Next-use distance of a tensor no prediction mentions: the furthest.
inline constexpr uint64_t kNoPredictedUse =
    std::numeric_limits<uint64_t>::max();

// Another copy of the same tensor that a rule about this copy looks at.
struct PeerView {
  CopyState state = CopyState::kAbsent;
  bool leased = false;
  bool transfer_pinned = false;  // a transfer is reading it
};

// One copy of one tensor on one tier.
struct CopyView {
  TensorId id{};
  Tier tier = Tier::kDevice;
  uint64_t bytes = 0;   // the extent the copy holds on its tier
  uint64_t offset = 0;  // where that extent starts, bytes from the arena base
  CopyState state = CopyState::kAbsent;
  bool leased = false;           // a read or write lease holds it
  bool transfer_pinned = false;  // a transfer is reading it
  // An acquire is waiting for it (for its load to end, say): it is used now,
  // whatever its predicted next use says (the predictor counted the access
  // when the acquire began).
  bool awaited = false;
  // Valid with no valid copy on a slower tier: dropping it would lose the
  // contents, so it must be written back first.
  bool dirty = false;
  bool is_home = false;       // the tier where the tensor's space is reserved
  bool has_contents = false;  // false when new or discarded
  PeerView home;              // the tensor's copy on its home tier
  // The tensor's device copy. In unified memory it is this host copy's pages
  // resident on the GPU.
  PeerView device;
  // Predicted distance in accesses to the tensor's next use (0: the next
  // access); kNoPredictedUse when no prediction mentions it.
  uint64_t next_use = kNoPredictedUse;
  uint64_t last_use = 0;  // LRU tick of the copy's last acquire or load
};

}  // namespace strata

#endif  // STRATA_SCHEDULER_SNAPSHOT_H_
