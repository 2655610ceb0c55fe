// store_parts.h: the plain types StoreCore works with — the reserved tiers
// it runs on (TierSet), the outcome of one attempt to make room on a tier
// (MakeRoomResult) and a background prefetch (PrefetchJob) — apart from the
// class so that its header stays a map of its operations.
//
// Thread safety: plain values; StoreCore guards them with its mutex.
#ifndef STRATA_SRC_STORE_PARTS_H_
#define STRATA_SRC_STORE_PARTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "scheduler/residency_plan.h"
#include "src/bounce_pool.h"
#include "src/extent_allocator.h"
#include "strata/tensor.h"
#include "tiers/device/device_backend.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {

struct TensorRecord;

// The reserved tiers a StoreCore runs on, built by Store::Open (or a test).
struct TierSet {
  std::unique_ptr<DeviceBackend> device;
  std::string device_why;  // why this backend was chosen
  std::byte* device_base = nullptr;
  std::unique_ptr<HostArena> host;
  std::unique_ptr<BouncePool> bounce;  // null without NVMe
  std::unique_ptr<NvmeTier> nvme;      // null without NVMe
};

// One attempt of AllocateOn that never waits: reserves the space, drops
// clean victims on the way, or says what must happen first.
struct MakeRoomResult {
  enum Kind {
    kReserved,      // `extent` is ours
    kEvictUnified,  // `victim`'s device residency must end (EvictUnified)
    kWriteBack,     // `victim`'s dirty copy must be written back
    kWait,          // a transfer in flight will free or unpin space
    kFailed,        // `status` says why
  };
  Kind kind = kFailed;
  bool tier_full = false;  // kFailed because nothing can be evicted now
  Extent extent{};
  TensorRecord* victim = nullptr;
  absl::Status status;
  static MakeRoomResult Failed(absl::Status status) {
    return {.kind = kFailed, .status = std::move(status)};
  }
};

// Large model state (parameters, gradients, optimizer states: at least a
// sixteenth of the tier) packs against the top of the device and host arenas;
// activations and small tensors against the bottom. Short-lived copies then do
// not split the room a large weight needs while others are leased (the idea
// of the small/large pools of PyTorch's caching allocator, by lifetime).
// Leased copies cannot move, so this lowers the odds of a fragmented tier
// rather than ruling it out. NVMe extents are reserved once per tensor: best
// fit.
Placement PlacementFor(Tier tier, const TensorSpec& spec, uint64_t capacity);

// A planned move, write-back or drop of tensor `id`'s copy on `from`
// (`to`: a move's target), as the executor (planning.cc) carries it out.
struct PendingLeave {
  TensorId id;
  Tier from;
  Tier to;
  TransferKind kind;
  bool asked = false;  // a move's load to `to` was queued
};

// What leaving a tier did: done (or nothing to do), or blocked for now (the
// copy is leased, waited for or in a transfer) and to be tried again.
enum class Leave : uint8_t { kDone, kBlocked };

// A background load of one copy, taken step by step on the store's
// executor (prefetch.cc).
struct PrefetchJob {
  enum class Stage : uint8_t {
    kStart,             // checks; marks the copy loading
    kHostWait,          // unified device copy: the host copy must settle
    kReserve,           // space for the copy on `filling`
    kLoad,              // starts the transfer that fills `filling`
    kLoaded,            // the copy on `filling` has its bytes
    kReserveResidency,  // unified device copy: residency on the device
    kMigrate,           // unified device copy: starts the migration
    kMigrated,          // unified device copy: the pages are there
  };
  TensorId id;
  Tier tier;            // the copy the prefetch brings
  uint64_t bytes = 0;   // the tensor's size, for the automatic window
  Tier filling = tier;  // the copy being filled now (unified: host first)
  Stage stage = Stage::kStart;
  uint64_t protect = 0;  // FillCopy's protect_within
  absl::Status failure;  // set by a failed transfer before its step
  // Nothing could be evicted to make room now (TierFull): the one failure
  // that is a skip, not counted failed; a later acquire loads it.
  bool no_room = false;
};

}  // namespace strata

#endif  // STRATA_SRC_STORE_PARTS_H_
