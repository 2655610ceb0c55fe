// store.h: Store, strata's tiered tensor store.
//
// A Store keeps tensors in three tiers — device memory, pinned host memory,
// NVMe swap files — under byte budgets fixed at Open. Each tensor has a home
// tier where its space is always reserved, and may have cache copies on faster
// tiers. Acquire brings a tensor to a tier and pins it there under a Lease;
// when a tier fills up, unpinned copies are evicted (dirty ones written back
// to a lower tier first). Data on NVMe carries a checksum verified on read.
// A failed transfer leaves the last valid copy intact.
//
// Thread safety: every method may be called concurrently from any thread.
//
// Example:
//   strata::StoreOptions options;
//   options.nvme.directories = {"/mnt/nvme0"};
//   options.nvme.budget_bytes = 8 * strata::kGiB;
//   auto store = strata::Store::Open(options);            // StatusOr
//   auto id = (*store)->Create({.name = "w0", .size_bytes = 4096});
//   auto lease = (*store)->Acquire(*id, strata::Tier::kDevice,
//                                  strata::Access::kOverwrite);
//   ... use lease->data() on the device ...
#ifndef STRATA_STORE_H_
#define STRATA_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/lease.h"
#include "strata/options.h"
#include "strata/stats.h"
#include "strata/tensor.h"

namespace strata {

// Where a tensor's copies are, for reports and tests.
struct Residency {
  enum class State : uint8_t { kAbsent, kLoading, kClean, kDirty, kEvicting };
  State tiers[kNumTiers] = {State::kAbsent, State::kAbsent, State::kAbsent};
  bool has_contents = false;  // false when new or after Discard
  int leases = 0;             // leases currently held on any tier
};

class Store {
 public:
  // Reserves every tier's budget and returns a ready store. Errors:
  // InvalidArgument for inconsistent options (zero budgets, a block size that
  // is not a multiple of 4096, ...); ResourceExhausted when a budget exceeds
  // what the machine has (GPU memory, physical RAM, free disk);
  // NotFound/PermissionDenied for a missing or unwritable NVMe directory;
  // Internal for a CUDA error (with its name).
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options);

  // What Open would refuse of `options` without reserving anything: their
  // consistency (InvalidArgument) and the NVMe directories (NotFound,
  // PermissionDenied, InvalidArgument for a file). Budgets against the
  // machine are Open's to check. For a caller with long work before Open.
  static absl::Status CheckOptions(const StoreOptions& options);

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  // Closes the store and frees every tier. Outstanding leases become inert:
  // their Release() returns FailedPrecondition and their data() must not be
  // used.
  virtual ~Store() = default;

  // Registers a tensor and reserves its space on its home tier, evicting cache
  // copies there if needed. The tensor starts with no contents. Errors:
  // InvalidArgument (size 0, shape/size mismatch), ResourceExhausted (larger
  // than its home tier, or the home tier is full of reserved tensors).
  virtual absl::StatusOr<TensorId> Create(const TensorSpec& spec) = 0;

  // Frees every copy of the tensor. NotFound for an unknown or destroyed id,
  // FailedPrecondition while it is leased.
  virtual absl::Status Destroy(TensorId id) = 0;

  // Brings the tensor to `tier` (unless `access` is kOverwrite) and pins it
  // there until the lease is released. A kWrite or kOverwrite lease makes all
  // other copies stale. Leases follow reader/writer rules across tiers: many
  // readers or one writer. Blocks until the data is on `tier`, except a
  // kRead on the device served from the host copy, which is stream-ordered:
  // the H2D copy is queued and the acquire returns; `stream` waits for it on
  // the GPU (the host copy stays pinned until it has happened; on the
  // simulated device it has by the return). `stream` is the caller's
  // cudaStream_t on a real GPU (null: the legacy default stream); work on it
  // is ordered after the copy and the previous lease's release. A copy that
  // fails after the acquire returned is reported (Internal; the host copy is
  // intact) by the Release of every lease of it (it serves no new lease and
  // goes with the last), or by the tensor's next Acquire if they had all
  // ended (Discard forgets it).
  // Errors: NotFound; InvalidArgument (a tier below the tensor's home);
  // FailedPrecondition (conflicting lease held, or kRead of a tensor with no
  // contents); ResourceExhausted (the tier is full of leased copies, and the
  // message lists who holds it; or the disk under an NVMe swap file is full,
  // and the message names its directory); DataLoss (NVMe checksum mismatch);
  // Unavailable (an NVMe read or write failed, e.g. EIO: retry); Internal (a
  // CUDA copy failed, with the error's name). After a failed transfer the
  // last valid copy is intact.
  virtual absl::StatusOr<Lease> Acquire(TensorId id, Tier tier, Access access,
                                        void* stream = nullptr) = 0;

  // Asks for a copy on `tier` soon; returns at once. The copy is made on a
  // background thread and may be evicted again before use. NotFound and
  // InvalidArgument as for Acquire; a prefetch that then fails, with any code,
  // is counted in Stats::prefetch.failed (one the tier has no room for is
  // skipped, not failed).
  virtual absl::Status Prefetch(TensorId id, Tier tier) = 0;

  // Removes the tensor's copies from every tier faster than `to_tier`, writing
  // dirty contents to `to_tier` first. InvalidArgument if `to_tier` is below
  // the home tier; FailedPrecondition if a copy to remove is leased.
  virtual absl::Status Evict(TensorId id, Tier to_tier) = 0;

  // Drops the tensor's contents with no write-back (activations after
  // backward, gradients after the step). Its home space stays reserved.
  // FailedPrecondition while leased.
  virtual absl::Status Discard(TensorId id) = 0;

  // Convenience copies between caller memory and the tensor: `bytes` at byte
  // `offset`, through a lease the call takes and releases itself — on the
  // host, or on the device when the tensor's home is the device or the host
  // has no room for it. Write takes a kWrite lease (kOverwrite for the whole
  // tensor) and copies the bytes in before it is granted, so a failed Write
  // leaves the previous contents; Read takes a kRead lease. Blocks until
  // done. Errors: NotFound (unknown or destroyed id); InvalidArgument (the
  // range is out of bounds, or a null buffer with bytes > 0);
  // FailedPrecondition (Read of a tensor with no contents, or a conflicting
  // lease held); and the hidden lease's errors, as for Acquire:
  // ResourceExhausted (neither tier could make room, or the disk under a swap
  // file is full), DataLoss (NVMe checksum mismatch while loading the
  // contents; or a failed Write to a device-home tensor tore its only copy,
  // whose contents are then discarded), Unavailable (NVMe I/O failed),
  // Internal (a CUDA copy failed).
  virtual absl::Status Write(TensorId id, const void* src, uint64_t bytes,
                             uint64_t offset = 0) = 0;
  virtual absl::Status Read(TensorId id, void* dst, uint64_t bytes,
                            uint64_t offset = 0) = 0;

  // The tensor's spec and where its copies are. NotFound for unknown ids.
  virtual absl::StatusOr<TensorSpec> GetSpec(TensorId id) const = 0;
  virtual absl::StatusOr<Residency> GetResidency(TensorId id) const = 0;

  // Step boundaries for the scheduler: it records the acquires of a step,
  // replays that trace to prefetch what comes next (SchedulerOptions) and to
  // evict the copy needed furthest ahead (EvictionPolicy::kBelady). Without
  // them the step is detected when the acquire sequence repeats. Cheap; never
  // fail.
  virtual void BeginStep() = 0;
  virtual void EndStep() = 0;

  // While paused, the scheduler starts no prefetch (queued ones are dropped);
  // acquires are still observed, so the learned trace stays whole.
  // PausePrefetch(true) returns once the prefetches already moving bytes have
  // finished. For a caller about to place several large leases on a crowded
  // tier, which prefetched copies would fragment. Never fails.
  virtual void PausePrefetch(bool paused) = 0;

  // A snapshot of the counters in strata/stats.h: cumulative since Open
  // unless named current or peak. Takes the store's lock briefly; cheap enough
  // to call once per step. Never fails.
  virtual Stats GetStats() const = 0;

  // Writes the timeline of transfers and lease spans as Chrome trace-event
  // JSON (opens in Perfetto). FailedPrecondition unless StoreOptions::timeline
  // is on; an errno-based error when `path` cannot be written.
  virtual absl::Status WriteTimeline(const std::string& path) const = 0;

  // A human-readable description of the tiers: device backend and why it was
  // chosen, budgets, NVMe files and I/O engine.
  virtual std::string DescribeTiers() const = 0;

 protected:
  Store() = default;
};

}  // namespace strata

#endif  // STRATA_STORE_H_
