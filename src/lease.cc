// lease.cc: Lease, a move-only grant that releases itself on destruction.
#include "strata/lease.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_format.h"
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

absl::Status Lease::CopyOut(uint64_t offset, void* dst, uint64_t bytes,
                            void* stream) const {
  return CopyRange(offset, dst, bytes, false, stream);
}

absl::Status Lease::CopyIn(uint64_t offset, const void* src, uint64_t bytes,
                           void* stream) {
  if (data_ != nullptr && access_ == Access::kRead) {
    return absl::FailedPreconditionError(
        "CopyIn needs a kWrite or kOverwrite lease; this one is kRead");
  }
  return CopyRange(offset, const_cast<void*>(src), bytes, true, stream);
}

absl::Status Lease::CopyRange(uint64_t offset, void* user, uint64_t bytes,
                              bool into_lease, void* stream) const {
  if (data_ == nullptr) {
    return absl::FailedPreconditionError(released_
                                             ? "lease already released"
                                             : "empty lease (moved from or "
                                               "default-constructed)");
  }
  if (offset > size_bytes_ || bytes > size_bytes_ - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range [%d, %d) is outside the leased tensor of %d bytes", offset,
        offset + bytes, size_bytes_));
  }
  if (bytes == 0) return absl::OkStatus();
  if (user == nullptr) return absl::InvalidArgumentError("null buffer");
  std::shared_ptr<internal::LeaseReleaser> owner = owner_.lock();
  if (owner == nullptr) {
    return absl::FailedPreconditionError(
        "lease outlived its store: the store was closed");
  }
  return owner->CopyLeased(id_, token_, static_cast<std::byte*>(data_) + offset,
                           user, bytes, into_lease, stream);
}

}  // namespace strata
