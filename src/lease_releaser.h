// lease_releaser.h: the store side of a Lease. A Lease holds a weak_ptr to its
// releaser, so a lease that outlives its store fails cleanly instead of
// touching freed state.
#ifndef STRATA_SRC_LEASE_RELEASER_H_
#define STRATA_SRC_LEASE_RELEASER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "strata/lease.h"

namespace strata::internal {

class LeaseReleaser {
 public:
  virtual ~LeaseReleaser() = default;
  // Ends the grant `token` of tensor `id`. FailedPrecondition if unknown.
  virtual absl::Status ReleaseLease(TensorId id, uint64_t token,
                                    void* stream) = 0;
  // Copies `bytes` between the granted copy's bytes at `leased` and caller
  // host memory `user` (into the copy when `into_lease`), after the work on
  // `stream`. FailedPrecondition if the grant `token` is unknown.
  virtual absl::Status CopyLeased(TensorId id, uint64_t token, void* leased,
                                  void* user, uint64_t bytes, bool into_lease,
                                  void* stream) = 0;

 protected:
  // Lease's constructor is private; releasers build leases through this.
  static Lease MakeLease(std::weak_ptr<LeaseReleaser> owner, TensorId id,
                         Tier tier, Access access, void* data,
                         uint64_t size_bytes, uint64_t token) {
    return Lease(std::move(owner), id, tier, access, data, size_bytes, token);
  }
};

}  // namespace strata::internal

#endif  // STRATA_SRC_LEASE_RELEASER_H_
