// lease_group.h: LeaseGroup, the leases one operation needs, taken all or
// nothing.
//
// A layer's forward or backward pass holds several leases on one tier at once
// (input, weight, bias, outputs). Leased copies cannot move, so with a tight
// budget the tier can be fragmented by the group's own first leases: enough
// bytes are free, but not in one range. LeaseGroup acquires the members that
// keep contents first and the kOverwrite ones last, largest first within each
// (they need the longest free ranges). When a lease still fails with
// ResourceExhausted, it releases what it holds, pauses the store's prefetch
// (so that no prefetched copy lands between its members), evicts from the
// tier every tensor of the retry set that is not leased, and tries again — up
// to kAttempts times in all. On failure nothing stays leased; members asked
// for with kOverwrite may have lost their contents (the caller was about to
// replace them).
#ifndef STRATA_TRAIN_MODEL_LEASE_GROUP_H_
#define STRATA_TRAIN_MODEL_LEASE_GROUP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "strata/store.h"
#include "train/model/activation_meter.h"

namespace strata::train {

class LeaseGroup {
 public:
  // All leases are on `tier`; `stream` is passed to Acquire and Release.
  // `retry_evictions` (not owned; may be null) are the tensors to evict from
  // the tier before a retry — typically every tensor of the caller's model;
  // the group's own are always evicted. `meter` (not owned; may be null)
  // hears of every member written through the group once it is released.
  LeaseGroup(Store* store, Tier tier, void* stream,
             const std::vector<TensorId>* retry_evictions = nullptr,
             ActivationMeter* meter = nullptr)
      : store_(store),
        tier_(tier),
        stream_(stream),
        retry_evictions_(retry_evictions),
        meter_(meter) {}
  ~LeaseGroup() { Release().IgnoreError(); }
  LeaseGroup(const LeaseGroup&) = delete;
  LeaseGroup& operator=(const LeaseGroup&) = delete;

  static constexpr int kAttempts = 3;

  // Adds a request; returns its index for data().
  int Add(TensorId id, Access access);

  // Acquires every request. Errors: Store::Acquire's, after the retry for
  // ResourceExhausted; nothing is held then.
  absl::Status Acquire();

  // Request `index`'s bytes on the tier, as float (valid after Acquire).
  float* data(int index) const;
  // The same bytes as 16-bit bf16/fp16 bit patterns (precision.h).
  uint16_t* half(int index) const {
    return reinterpret_cast<uint16_t*>(data(index));
  }
  // Request `index`'s lease (valid after Acquire): for its range copies
  // (Lease::CopyOut, CopyIn).
  Lease& lease(int index) { return requests_[index].lease; }
  // Request `index`'s size in bytes (valid after Acquire).
  uint64_t bytes(int index) const { return requests_[index].bytes; }

  // Releases every lease on the stream; the first error wins.
  absl::Status Release();

  // How many evict-and-retry rounds groups needed, process-wide (reports).
  static uint64_t retries();

 private:
  struct Request {
    TensorId id;
    Access access;
    uint64_t bytes = 0;
    Lease lease;
  };
  absl::Status AcquireOnce();
  void EvictFromTier();

  Store* const store_;
  const Tier tier_;
  void* const stream_;
  std::vector<Request> requests_;
  const std::vector<TensorId>* const retry_evictions_;
  ActivationMeter* const meter_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_LEASE_GROUP_H_
