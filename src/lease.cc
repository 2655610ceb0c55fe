// lease.cc: Lease, a move-only grant that releases itself on destruction.
#include "strata/lease.h"

#include <utility>

#include "src/lease_releaser.h"

namespace strata {

Lease::Lease(std::weak_ptr<internal::LeaseReleaser> owner, TensorId id,
             Tier tier, Access access, void* data, uint64_t size_bytes,
             uint64_t token)
    : owner_(std::move(owner)),
      id_(id),
      tier_(tier),
      access_(access),
      data_(data),
      size_bytes_(size_bytes),
      token_(token) {}

Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this == &other) return *this;
  if (valid()) Release().IgnoreError();
  owner_ = std::move(other.owner_);
  id_ = other.id_;
  tier_ = other.tier_;
  access_ = other.access_;
  data_ = std::exchange(other.data_, nullptr);
  size_bytes_ = std::exchange(other.size_bytes_, 0);
  token_ = other.token_;
  released_ = std::exchange(other.released_, false);
  return *this;
}

Lease::~Lease() {
  if (valid()) Release().IgnoreError();
}

absl::Status Lease::Release(void* stream) {
  if (data_ == nullptr) {
    return absl::FailedPreconditionError(released_
                                             ? "lease already released"
                                             : "empty lease (moved from or "
                                               "default-constructed)");
  }
  data_ = nullptr;
  released_ = true;
  std::shared_ptr<internal::LeaseReleaser> owner = owner_.lock();
  owner_.reset();
  if (owner == nullptr) {
    return absl::FailedPreconditionError(
        "lease outlived its store: the store was closed before the lease was "
        "released");
  }
  return owner->ReleaseLease(id_, token_, stream);
}

}  // namespace strata
