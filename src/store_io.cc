// store_io.cc: Store::Write and Store::Read, convenience copies between
// caller memory and a tensor. Writes copy the caller's bytes into the copy
// before its lease is granted, so a failed copy leaves the previous contents
// intact.
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {

absl::Status StoreCore::CopyUserBytes(TensorRecord& rec, Tier tier,
                                      const UserBytes& user) {
  std::byte* data =
      mover_->Pointer({tier, *rec.copy(tier).extent}) + user.offset;
  if (user.bytes == 0) return absl::OkStatus();
  MutexUnlock unlocked(&mu_);
  if (tier == Tier::kHost) {
    std::memcpy(data, user.src, user.bytes);
    return absl::OkStatus();
  }
  return tiers_.device->Copy(CopyKind::kH2D, data, user.src, user.bytes);
}

absl::Status StoreCore::Write(TensorId id, const void* src, uint64_t bytes,
                              uint64_t offset) {
  return CopyThroughLease(id, const_cast<void*>(src), bytes, offset, true);
}

absl::Status StoreCore::Read(TensorId id, void* dst, uint64_t bytes,
                             uint64_t offset) {
  return CopyThroughLease(id, dst, bytes, offset, false);
}

absl::Status StoreCore::CopyThroughLease(TensorId id, void* user,
                                         uint64_t bytes, uint64_t offset,
                                         bool to_tensor) {
  STRATA_ASSIGN_OR_RETURN(TensorSpec spec, GetSpec(id));
  if (offset > spec.size_bytes || bytes > spec.size_bytes - offset) {
    return absl::InvalidArgumentError(
        absl::StrFormat("range [%d, %d) is outside tensor '%s' of %d bytes",
                        offset, offset + bytes, spec.name, spec.size_bytes));
  }
  if (bytes > 0 && user == nullptr) {
    return absl::InvalidArgumentError("null buffer");
  }
  // Through host memory when the tensor has room there, else the device.
  absl::StatusOr<Lease> lease = absl::ResourceExhaustedError("");
  for (Tier tier : {Tier::kHost, Tier::kDevice}) {
    if (lease.status().code() != absl::StatusCode::kResourceExhausted) break;
    if (tier == Tier::kHost && spec.home == Tier::kDevice) continue;
    // Unified memory: the host lease's pointer is the device copy's too.
    if (tier == Tier::kDevice && unified()) continue;
    if (to_tensor) {
      // The bytes are copied in before the lease is granted, so a failed
      // copy leaves the previous contents intact.
      const UserBytes fill{user, bytes, offset};
      const bool whole = offset == 0 && bytes == spec.size_bytes;
      const absl::Time start = absl::Now();
      MutexLock lock(&mu_);
      bool stalled = false;
      lease = AcquireExclusive(id, tier,
                               whole ? Access::kOverwrite : Access::kWrite,
                               nullptr, &stalled, &fill);
      if (lease.ok()) CountAcquire(id, tier, start, stalled);
    } else {
      lease = AcquireLease(id, tier, Access::kRead, nullptr,
                           /*report_failed_load=*/false);
    }
  }
  STRATA_RETURN_IF_ERROR(lease.status());
  absl::Status copied;
  if (!to_tensor && bytes > 0) {
    const std::byte* data = static_cast<std::byte*>(lease->data()) + offset;
    if (lease->tier() == Tier::kHost) {
      std::memcpy(user, data, bytes);
    } else {
      copied = tiers_.device->Copy(CopyKind::kD2H, user, data, bytes);
    }
  }
  absl::Status released = lease->Release();
  STRATA_RETURN_IF_ERROR(copied);
  return released;
}

absl::Status StoreCore::CopyLeased(TensorId id, uint64_t token, void* leased,
                                   void* user, uint64_t bytes, bool into_lease,
                                   void* stream) {
  Tier tier;
  std::string label;
  {
    MutexLock lock(&mu_);
    auto it = closed_ ? tensors_.end() : tensors_.find(id);
    if (it == tensors_.end() || !it->second->leases.contains(token)) {
      return absl::FailedPreconditionError(closed_ ? "the store was closed"
                                                   : "lease already released");
    }
    tier = it->second->leases[token].tier;
    label = it->second->spec.name;
  }
  // The leased copy cannot move or be freed while the grant is held, and
  // the lease's holder is its only user: the copy needs no lock.
  if (tier == Tier::kHost) {
    if (into_lease) {
      std::memcpy(leased, user, bytes);
    } else {
      std::memcpy(user, leased, bytes);
    }
    return absl::OkStatus();
  }
  // Stream-ordered: the copy starts after the caller's work queued so far.
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<DeviceEvent> after,
                          tiers_.device->RecordEvent(stream));
  const absl::Status status =
      into_lease ? mover_->CopyLeased(CopyKind::kH2D, leased, user, bytes,
                                      after.get(), label)
                 : mover_->CopyLeased(CopyKind::kD2H, user, leased, bytes,
                                      after.get(), label);
  if (status.ok()) return status;
  return absl::Status(
      status.code(),
      absl::StrFormat(
          "copying %d bytes of tensor '%s' %s: %s", bytes, label,
          into_lease ? "caller memory -> device" : "device -> caller memory",
          status.message()));
}

std::optional<absl::Status> StoreCore::WriteBeside(TensorRecord& rec,
                                                   const UserBytes& user) {
  TierCopy& copy = rec.copy(Tier::kDevice);
  absl::StatusOr<Extent> fresh =
      AllocateOn(Tier::kDevice, rec.spec.size_bytes, rec.spec);
  if (!fresh.ok()) return std::nullopt;  // no room: write in place
  std::byte* to = mover_->Pointer({Tier::kDevice, *fresh});
  const std::byte* from = mover_->Pointer({Tier::kDevice, *copy.extent});
  const uint64_t size = rec.spec.size_bytes;
  absl::Status status;
  {
    MutexUnlock unlocked(&mu_);
    if (user.bytes < size) {  // keep the bytes the write does not cover
      status = tiers_.device->Copy(CopyKind::kD2D, to, from, size);
    }
    if (status.ok()) {
      status = tiers_.device->Copy(CopyKind::kH2D, to + user.offset, user.src,
                                   user.bytes);
    }
  }
  Extent drop = status.ok() ? *copy.extent : *fresh;
  if (status.ok()) {
    AwaitDeviceReaders(copy);  // kernels may still read the old extent
    copy.extent = *fresh;
  }
  alloc(Tier::kDevice).Free(drop);
  if (!status.ok()) copy.MoveTo(CopyState::kValid);  // the old copy is intact
  Changed();
  return status;
}

absl::Status StoreCore::FailedUserCopy(TensorRecord& rec, Tier tier,
                                       const absl::Status& error) {
  bool other_valid = false;
  for (int t = 0; t < kNumTiers; ++t) {
    other_valid |= t != static_cast<int>(tier) &&
                   rec.copies[t].state() == CopyState::kValid;
  }
  AbandonCopy(rec, tier);  // torn or new: the other copies are the contents
  if (other_valid || !rec.has_contents) return error;
  // A device-homed tensor has no copy elsewhere to fall back on.
  rec.has_contents = false;
  return absl::DataLossError(absl::StrFormat(
      "writing tensor '%s' failed midway (%s); its only copy, on its home "
      "tier %s, is torn, so its contents were discarded: write it again",
      rec.spec.name, error.ToString(), TierName(tier)));
}

}  // namespace strata
