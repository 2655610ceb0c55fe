// lease.h: Lease, the RAII handle Store::Acquire returns.
//
// A lease pins one tensor's copy on one tier: data() stays valid and the copy
// stays put until the lease is released (Release() or destruction). Move-only.
// A Lease is not thread-safe itself; different leases may be used from
// different threads.
#ifndef STRATA_LEASE_H_
#define STRATA_LEASE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "strata/tensor.h"

namespace strata {

namespace internal {
class LeaseReleaser;  // the store side; see src/lease_releaser.h
}  // namespace internal

class Lease {
 public:
  Lease() = default;  // an empty lease: valid() is false
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();  // releases if still held; errors are dropped (use Release())

  // The tensor's bytes on tier(): device memory for kDevice, pinned host
  // memory otherwise. Null after release.
  void* data() const { return data_; }
  uint64_t size_bytes() const { return size_bytes_; }
  Tier tier() const { return tier_; }
  Access access() const { return access_; }
  TensorId id() const { return id_; }
  bool valid() const { return data_ != nullptr; }

  // Ends the lease. On a real GPU, `stream` (a cudaStream_t, or null for the
  // legacy default stream) is the stream whose work last touched data();
  // eviction and the next lease wait for it. FailedPrecondition if the lease
  // was already released or is empty, or if its store was closed.
  absl::Status Release(void* stream = nullptr);

  // Range copies between the leased copy and caller host memory: `bytes` at
  // byte `offset` of the tensor, without a second lease — how a host
  // optimizer streams a device-leased gradient and weight through buffers a
  // fraction of their size. On the device tier each is a D2H (CopyOut) or
  // H2D (CopyIn) copy, counted on that link, ordered after the work already
  // queued on `stream` (the caller's cudaStream_t; null: the legacy default
  // stream), and complete when the call returns; on the host tier a memcpy.
  // CopyIn needs a kWrite or kOverwrite lease. Errors: FailedPrecondition
  // (released or empty lease, CopyIn on a kRead lease, the store closed);
  // InvalidArgument (the range is outside the tensor, or a null buffer with
  // bytes > 0); Internal (a CUDA copy failed: the destination range is
  // undefined, the source untouched).
  absl::Status CopyOut(uint64_t offset, void* dst, uint64_t bytes,
                       void* stream = nullptr) const;
  absl::Status CopyIn(uint64_t offset, const void* src, uint64_t bytes,
                      void* stream = nullptr);

 private:
  friend class internal::LeaseReleaser;
  Lease(std::weak_ptr<internal::LeaseReleaser> owner, TensorId id, Tier tier,
        Access access, void* data, uint64_t size_bytes, uint64_t token);
  // CopyOut and CopyIn's checks and the store's copy.
  absl::Status CopyRange(uint64_t offset, void* user, uint64_t bytes,
                         bool into_lease, void* stream) const;

  std::weak_ptr<internal::LeaseReleaser> owner_;
  TensorId id_;
  Tier tier_ = Tier::kHost;
  Access access_ = Access::kRead;
  void* data_ = nullptr;
  uint64_t size_bytes_ = 0;
  uint64_t token_ = 0;  // identifies this grant to the store
  bool released_ = false;
};

}  // namespace strata

#endif  // STRATA_LEASE_H_
