// tensor_record.h: a tensor's residency state as the store tracks it.
//
// Per tier a copy is absent, loading (a transfer is filling it), valid, or
// evicting (a write-back is reading it before it is freed). Clean/dirty is
// derived, not stored: a valid copy is dirty when no slower tier holds a valid
// copy, so it can only be dropped after a write-back. The home tier's extent
// is reserved for the tensor's whole life, valid or not.
#ifndef STRATA_SRC_TENSOR_RECORD_H_
#define STRATA_SRC_TENSOR_RECORD_H_

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "scheduler/predictor.h"
#include "scheduler/snapshot.h"
#include "src/extent_allocator.h"
#include "strata/tensor.h"
#include "tiers/device/device_backend.h"

namespace strata {

// CopyState (absent, loading, valid, evicting) is the scheduler's, so that
// its snapshots speak the store's states (scheduler/snapshot.h).

// The transitions a copy's state may take, and why:
//   absent   -> loading   a fill starts (acquire, prefetch, write-back target)
//   loading  -> valid     the fill completed
//   loading  -> absent    the fill failed or was abandoned
//   valid    -> loading   an exclusive acquire rebuilds the copy in place
//   valid    -> evicting  a write-back reads it before it is freed
//   valid    -> absent    dropped (clean eviction, stale after a write)
//   evicting -> valid     the write-back finished (or failed) and it stays
//   evicting -> absent    the write-back finished and it is freed
bool IsCopyTransition(CopyState from, CopyState to);

class TierCopy {
 public:
  CopyState state() const { return state_; }
  // The one way a copy's state changes; a transition not listed above is a
  // store bug (asserted in debug builds).
  void MoveTo(CopyState to) {
    assert(IsCopyTransition(state_, to));
    state_ = to;
  }

  std::optional<Extent> extent;  // space held on this tier
  int read_leases = 0;
  bool write_lease = false;
  int transfer_pins = 0;    // in-flight transfers reading this copy
  uint64_t last_use = 0;    // LRU tick of the last acquire or load
  bool prefetched = false;  // loaded by Prefetch and not yet acquired
  // Acquires waiting for this copy (a load or another lease in flight): their
  // access is now, though the predictor has already counted it, so eviction
  // leaves the copy to them (StoreCore::WaitForCopy).
  int acquires_waiting = 0;
  // Prefetch asked for this copy and it has not arrived yet; an acquire that
  // finds it so counts the prefetch late.
  bool prefetch_pending = false;
  // Device tier: the point in the user's stream where the last lease ended;
  // copies out of this tier wait for it (stream-ordered, not CPU-blocking).
  // Until the first lease ends, a copy loaded stream-ordered holds its copy's
  // event here, as `queued_load` does until the reaper has seen it happen.
  std::shared_ptr<DeviceEvent> release_event;
  std::shared_ptr<DeviceEvent> queued_load;
  // Device tier: this copy's stream-ordered load failed after leases were
  // granted on it. It serves no new lease; each of its leases' releases
  // returns this, and the last one drops it.
  absl::Status load_error;

  bool leased() const { return read_leases > 0 || write_lease; }
  bool busy() const {
    return state_ == CopyState::kLoading || state_ == CopyState::kEvicting ||
           transfer_pins > 0;
  }

 private:
  CopyState state_ = CopyState::kAbsent;
};

inline bool IsCopyTransition(CopyState from, CopyState to) {
  switch (from) {
    case CopyState::kAbsent:
      return to == CopyState::kLoading;
    case CopyState::kLoading:
      return to == CopyState::kValid || to == CopyState::kAbsent;
    case CopyState::kValid:
      return to != CopyState::kValid;
    case CopyState::kEvicting:
      return to == CopyState::kValid || to == CopyState::kAbsent;
  }
  return false;
}

struct LeaseGrant {
  Tier tier;
  Access access;
  absl::Time granted;  // for the timeline's lease span
  PredictedUse use;    // where the predictor put the acquire
};

struct TensorRecord {
  TensorId id;
  TensorSpec spec;
  TierCopy copies[kNumTiers];
  bool has_contents = false;  // false when new or discarded
  PredictedUse last_use;      // of the latest acquire, for Discard
  // An exclusive (write/overwrite) acquire is preparing its copy: new readers
  // and prefetches wait or skip, so the preparation never waits on them.
  bool exclusive_pending = false;
  uint64_t nvme_checksum = 0;  // XXH3-64 of the bytes last written to NVMe
  // A stream-ordered load of the device copy that failed once every lease
  // of it had ended (StoreCore::EndQueuedLoad): the next Acquire says it.
  absl::Status queued_load_error;
  // Unified memory: write leases granted inside the current step (between
  // BeginStep and EndStep), whether the last whole step wrote the tensor
  // (unknown counts as written), and whether its range is advised
  // read-mostly.
  uint32_t writes_this_step = 0;
  bool written_last_step = true;
  bool read_mostly = false;
  absl::flat_hash_map<uint64_t, LeaseGrant> leases;  // token -> grant

  TierCopy& copy(Tier t) { return copies[static_cast<int>(t)]; }
  const TierCopy& copy(Tier t) const { return copies[static_cast<int>(t)]; }
  bool is_home(Tier t) const { return t == spec.home; }
  // Valid and no valid copy on a slower tier: dropping it would lose data.
  bool dirty(Tier t) const {
    if (copy(t).state() != CopyState::kValid) return false;
    for (int s = static_cast<int>(t) + 1; s < kNumTiers; ++s) {
      if (copies[s].state() == CopyState::kValid) return false;
    }
    return true;
  }
  // Valid and no other valid copy on any tier.
  bool only_copy(Tier t) const {
    if (copy(t).state() != CopyState::kValid) return false;
    for (int s = 0; s < kNumTiers; ++s) {
      if (s != static_cast<int>(t) && copies[s].state() == CopyState::kValid) {
        return false;
      }
    }
    return true;
  }
  bool any_busy() const {
    for (const TierCopy& c : copies) {
      if (c.busy()) return true;
    }
    return false;
  }
  bool write_leased() const {
    for (const TierCopy& c : copies) {
      if (c.write_lease) return true;
    }
    return false;
  }
};

}  // namespace strata

#endif  // STRATA_SRC_TENSOR_RECORD_H_
