// lease_group.h: LeaseGroup, the leases one operation needs, taken all or
// nothing.
//
// A layer's forward or backward pass holds several leases on one tier at once
// (input, weight, bias, outputs). Leased copies cannot move, so with a tight
// budget the tier can be fragmented by the group's own first leases: enough
// bytes are free, but not in one range. LeaseGroup acquires the largest
// tensors first (they need the longest free ranges) and, when a lease still
// fails with ResourceExhausted, releases what it holds, evicts those tensors'
// copies from the tier and tries once more on a tier that eviction has
// emptied of everything unleased. On failure nothing stays leased.
#ifndef STRATA_TRAIN_LEASE_GROUP_H_
#define STRATA_TRAIN_LEASE_GROUP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "strata/store.h"

namespace strata::train {

class LeaseGroup {
 public:
  // All leases are on `tier`; `stream` is passed to Acquire and Release.
  LeaseGroup(Store* store, Tier tier, void* stream)
      : store_(store), tier_(tier), stream_(stream) {}
  ~LeaseGroup() { Release().IgnoreError(); }
  LeaseGroup(const LeaseGroup&) = delete;
  LeaseGroup& operator=(const LeaseGroup&) = delete;

  // Adds a request; returns its index for data().
  int Add(TensorId id, Access access);

  // Acquires every request. Errors: Store::Acquire's, after the retry for
  // ResourceExhausted; nothing is held then.
  absl::Status Acquire();

  // Request `index`'s bytes on the tier, as float (valid after Acquire).
  float* data(int index) const;

  // Releases every lease on the stream; the first error wins.
  absl::Status Release();

  // How many groups needed the evict-and-retry, process-wide (for reports).
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
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_LEASE_GROUP_H_
