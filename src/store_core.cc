// store_core.cc: StoreCore's public operations: argument checks, lease rules
// and the acquire paths. Moving copies between tiers is in residency.cc.
#include "src/store_core.h"

#include <boost/asio/post.hpp>
#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "strata/status.h"

namespace strata {
namespace {

bool Slower(Tier a, Tier b) {
  return static_cast<int>(a) > static_cast<int>(b);
}

absl::Status CheckSpec(const TensorSpec& spec) {
  if (spec.size_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has size 0: give size_bytes >= 1", spec.name));
  }
  if (spec.size_bytes > (uint64_t{1} << 50)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' asks for %d bytes (over 1 PiB): check size_bytes",
        spec.name, spec.size_bytes));
  }
  if (spec.shape.empty()) return absl::OkStatus();
  uint64_t elements = 1;
  for (int64_t d : spec.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' has a negative extent %d in its shape", spec.name, d));
    }
    elements *= static_cast<uint64_t>(d);
  }
  if (elements * DTypeSize(spec.dtype) != spec.size_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': shape holds %d elements of %s (%d bytes) but size_bytes "
        "is %d",
        spec.name, elements, DTypeName(spec.dtype),
        elements * DTypeSize(spec.dtype), spec.size_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

StoreCore::StoreCore(const StoreOptions& options, TierSet tiers)
    : options_(options), tiers_(std::move(tiers)) {
  capacity_[0] = options_.device.budget_bytes;
  capacity_[1] = tiers_.host->size_bytes();
  capacity_[2] = tiers_.nvme ? tiers_.nvme->capacity_bytes() : 0;
  alloc_[0].emplace(capacity_[0], 256);
  alloc_[1].emplace(capacity_[1], kDirectIoAlignment);
  alloc_[2].emplace(capacity_[2], kDirectIoAlignment);
  mover_ = std::make_unique<Mover>(tiers_.device.get(), tiers_.device_base,
                                   tiers_.host->base(), tiers_.nvme.get(),
                                   tiers_.bounce.get());
  prefetch_pool_ =
      std::make_unique<boost::asio::thread_pool>(options_.prefetch_threads);
}

StoreCore::~StoreCore() { Shutdown(); }

void StoreCore::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    changed_.SignalAll();
  }
  prefetch_pool_->join();
}

absl::StatusOr<TensorRecord*> StoreCore::Find(TensorId id) const {
  if (closed_) return absl::FailedPreconditionError("the store is closed");
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrFormat(
        "no tensor with id %d (never created, or destroyed)", id.value));
  }
  return it->second.get();
}

absl::StatusOr<TensorRecord*> StoreCore::FindIdle(TensorId id) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    if (!rec->any_busy() && !rec->exclusive_pending) return rec;
    changed_.Wait(&mu_);
  }
}

absl::Status StoreCore::CheckLeaseTier(const TensorRecord& rec,
                                       Tier tier) const {
  if (tier == Tier::kNvme) {
    return absl::InvalidArgumentError(
        "leases are for device or host memory; NVMe has no pointer: acquire "
        "on kHost or kDevice");
  }
  if (Slower(tier, rec.spec.home)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' lives on %s (its home); it cannot be used on the slower "
        "%s tier",
        rec.spec.name, TierName(rec.spec.home), TierName(tier)));
  }
  if (!has_tier(tier)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("this store has no %s tier", TierName(tier)));
  }
  return absl::OkStatus();
}

absl::Status StoreCore::CheckConflict(const TensorRecord& rec, Tier tier,
                                      Access access) const {
  if (access == Access::kRead && !rec.has_contents) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s' has no contents (new or discarded): write it first, or "
        "acquire with kWrite/kOverwrite",
        rec.spec.name));
  }
  for (const auto& [token, grant] : rec.leases) {
    if (access == Access::kRead && grant.access == Access::kRead) continue;
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s' is leased for %s on %s; a %s lease on %s must wait "
        "until it is released",
        rec.spec.name, AccessName(grant.access), TierName(grant.tier),
        AccessName(access), TierName(tier)));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorId> StoreCore::Create(const TensorSpec& spec) {
  STRATA_RETURN_IF_ERROR(CheckSpec(spec));
  MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("the store is closed");
  if (!has_tier(spec.home)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has home %s but the store has no %s tier: configure it "
        "(--nvme-dir and --nvme-budget) or choose another home",
        spec.name, TierName(spec.home), TierName(spec.home)));
  }
  STRATA_ASSIGN_OR_RETURN(Extent home,
                          AllocateOn(spec.home, spec.size_bytes, spec));
  auto rec = std::make_unique<TensorRecord>();
  rec->id = TensorId{next_id_++};
  rec->spec = spec;
  rec->copy(spec.home).extent = home;
  const TensorId id = rec->id;
  tensors_.emplace(id, std::move(rec));
  return id;
}

absl::Status StoreCore::Destroy(TensorId id) {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
  if (!rec->leases.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s' is leased (%d leases): release them before Destroy",
        rec->spec.name, rec->leases.size()));
  }
  STRATA_ASSIGN_OR_RETURN(rec, FindIdle(id));
  if (!rec->leases.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s' was leased meanwhile: release it before Destroy",
        rec->spec.name));
  }
  for (int t = 0; t < kNumTiers; ++t) {
    TierCopy& c = rec->copies[t];
    if (c.extent) alloc(static_cast<Tier>(t)).Free(*c.extent);
  }
  tensors_.erase(id);
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::StatusOr<Lease> StoreCore::Acquire(TensorId id, Tier tier, Access access,
                                         void* stream) {
  const absl::Time start = absl::Now();
  MutexLock lock(&mu_);
  absl::StatusOr<Lease> lease =
      access == Access::kRead ? AcquireShared(id, tier, stream)
                              : AcquireExclusive(id, tier, access, stream);
  if (lease.ok()) CountAcquire(start);
  return lease;
}

void StoreCore::CountAcquire(absl::Time start) {
  ++acquires_;
  stall_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
}

absl::StatusOr<Lease> StoreCore::AcquireShared(TensorId id, Tier tier,
                                               void* stream) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
    STRATA_RETURN_IF_ERROR(CheckConflict(*rec, tier, Access::kRead));
    TierCopy& copy = rec->copy(tier);
    if (copy.state == CopyState::kValid && !rec->exclusive_pending) {
      return Grant(*rec, tier, Access::kRead, stream);
    }
    if (copy.state != CopyState::kAbsent || rec->exclusive_pending) {
      if (copy.prefetch_loading) {
        ++prefetch_.late;
        copy.prefetch_loading = false;
      }
      changed_.Wait(&mu_);
      continue;
    }
    copy.state = CopyState::kLoading;
    STRATA_RETURN_IF_ERROR(FillCopy(*rec, tier, Fill::kLoad));
    copy.state = CopyState::kValid;
    changed_.SignalAll();
  }
}

absl::StatusOr<Lease> StoreCore::AcquireExclusive(TensorId id, Tier tier,
                                                  Access access, void* stream,
                                                  const UserBytes* user) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
    STRATA_RETURN_IF_ERROR(CheckConflict(*rec, tier, access));
    if (rec->any_busy() || rec->exclusive_pending) {
      changed_.Wait(&mu_);
      continue;
    }
    TierCopy& copy = rec->copy(tier);
    const bool was_valid = copy.state == CopyState::kValid;
    if (was_valid && user == nullptr) return Grant(*rec, tier, access, stream);
    copy.state = CopyState::kLoading;
    rec->exclusive_pending = true;  // new readers wait; no conflict can arise
    absl::Status prepared =
        PrepareExclusive(*rec, tier, access, was_valid, user);
    rec->exclusive_pending = false;
    changed_.SignalAll();
    STRATA_RETURN_IF_ERROR(prepared);
    copy.state = CopyState::kValid;
    return Grant(*rec, tier, access, stream);
  }
}

absl::Status StoreCore::PrepareExclusive(TensorRecord& rec, Tier tier,
                                         Access access, bool was_valid,
                                         const UserBytes* user) {
  TierCopy& copy = rec.copy(tier);
  if (!was_valid) {
    Fill fill = Fill::kNone;
    if (access == Access::kWrite)
      fill = rec.has_contents ? Fill::kLoad : Fill::kZero;
    STRATA_RETURN_IF_ERROR(FillCopy(rec, tier, fill));
  } else if (rec.dirty(tier) && !rec.is_home(tier) && tier == Tier::kDevice) {
    // Writing user bytes in place over the only copy: a failed device copy
    // would tear it, so first save the contents to the home tier.
    const Tier home = rec.spec.home;
    rec.copy(home).state = CopyState::kLoading;
    absl::Status saved = Transfer(rec, tier, home);
    rec.copy(home).state = saved.ok() ? CopyState::kValid : CopyState::kAbsent;
    if (!saved.ok()) {
      copy.state = CopyState::kValid;
      return saved;
    }
  }
  if (user != nullptr) {
    absl::Status copied = CopyUserBytes(rec, tier, *user);
    if (!copied.ok()) {
      // The other copies still hold the previous contents.
      if (was_valid && rec.dirty(tier)) {
        copy.state = CopyState::kValid;  // host memcpy cannot tear; keep it
      } else {
        AbandonCopy(rec, tier);
      }
      return copied;
    }
  }
  // Grant drops the other copies; wait for transfers reading them.
  auto others_busy = [&rec, tier] {
    for (int t = 0; t < kNumTiers; ++t) {
      if (t != static_cast<int>(tier) && rec.copies[t].busy()) return true;
    }
    return false;
  };
  while (others_busy()) changed_.Wait(&mu_);
  return absl::OkStatus();
}

absl::StatusOr<Lease> StoreCore::Grant(TensorRecord& rec, Tier tier,
                                       Access access, void* stream) {
  TierCopy& copy = rec.copy(tier);
  if (tier == Tier::kDevice && copy.release_event != nullptr) {
    STRATA_RETURN_IF_ERROR(
        tiers_.device->StreamWait(stream, *copy.release_event));
  }
  if (access == Access::kRead) {
    ++copy.read_leases;
  } else {
    DropOthers(rec, tier);
    rec.has_contents = true;
    copy.write_lease = true;
  }
  if (copy.read_leases + (copy.write_lease ? 1 : 0) == 1) {
    leased_bytes_[static_cast<int>(tier)] += copy.extent->bytes;
  }
  if (copy.prefetched) {
    ++prefetch_.hit;
    copy.prefetched = false;
  }
  copy.last_use = ++tick_;
  const uint64_t token = next_token_++;
  rec.leases.emplace(token, LeaseGrant{tier, access});
  return MakeLease(weak_from_this(), rec.id, tier, access,
                   mover_->Pointer({tier, *copy.extent}), rec.spec.size_bytes,
                   token);
}

absl::Status StoreCore::ReleaseLease(TensorId id, uint64_t token,
                                     void* stream) {
  MutexLock lock(&mu_);
  auto it = tensors_.find(id);
  if (it == tensors_.end() || !it->second->leases.contains(token)) {
    return absl::FailedPreconditionError("lease already released");
  }
  TensorRecord& rec = *it->second;
  const LeaseGrant grant = rec.leases[token];
  rec.leases.erase(token);
  TierCopy& copy = rec.copy(grant.tier);
  if (grant.access == Access::kRead) {
    --copy.read_leases;
  } else {
    copy.write_lease = false;
  }
  if (!copy.leased())
    leased_bytes_[static_cast<int>(grant.tier)] -= copy.extent->bytes;
  changed_.SignalAll();
  if (grant.tier != Tier::kDevice || closed_) return absl::OkStatus();
  // Later copies out of this tier wait for the caller's work on `stream`.
  STRATA_ASSIGN_OR_RETURN(copy.release_event,
                          tiers_.device->RecordEvent(stream));
  return absl::OkStatus();
}

absl::Status StoreCore::Prefetch(TensorId id, Tier tier) {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
  STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
  ++prefetch_.issued;
  boost::asio::post(*prefetch_pool_,
                    [this, id, tier] { RunPrefetch(id, tier); });
  return absl::OkStatus();
}

void StoreCore::RunPrefetch(TensorId id, Tier tier) {
  MutexLock lock(&mu_);
  absl::StatusOr<TensorRecord*> found = Find(id);
  if (!found.ok()) return;  // destroyed meanwhile, or closing
  TensorRecord& rec = **found;
  TierCopy& copy = rec.copy(tier);
  if (!rec.has_contents || rec.write_leased() || rec.exclusive_pending ||
      copy.state != CopyState::kAbsent) {
    return;  // nothing to load, or someone else is handling it
  }
  copy.state = CopyState::kLoading;
  copy.prefetch_loading = true;
  if (!FillCopy(rec, tier, Fill::kLoad).ok()) {
    ++prefetch_.failed;
    copy.prefetch_loading = false;
    return;
  }
  copy.state = CopyState::kValid;
  copy.prefetched = copy.prefetch_loading;
  copy.prefetch_loading = false;
  changed_.SignalAll();
}

absl::Status StoreCore::Evict(TensorId id, Tier to_tier) {
  MutexLock lock(&mu_);
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, FindIdle(id));
    if (Slower(to_tier, rec->spec.home)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot evict tensor '%s' to %s: its home is the faster %s tier",
          rec->spec.name, TierName(to_tier), TierName(rec->spec.home)));
    }
    for (int t = 0; t < static_cast<int>(to_tier); ++t) {
      if (rec->copies[t].leased()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "tensor '%s' is leased on %s: release it before evicting",
            rec->spec.name, TierName(static_cast<Tier>(t))));
      }
    }
    bool kept = !rec->has_contents;
    for (int t = static_cast<int>(to_tier); t < kNumTiers; ++t) {
      kept = kept || rec->copies[t].state == CopyState::kValid;
    }
    if (kept) {
      for (int t = 0; t < static_cast<int>(to_tier); ++t) {
        if (rec->copies[t].state == CopyState::kValid) {
          DropCopy(*rec, static_cast<Tier>(t), /*eviction=*/true);
        }
      }
      return absl::OkStatus();
    }
    // Write the contents down to `to_tier` first, then drop the faster copies.
    rec->copy(to_tier).state = CopyState::kLoading;
    STRATA_RETURN_IF_ERROR(FillCopy(*rec, to_tier, Fill::kLoad));
    rec->copy(to_tier).state = CopyState::kValid;
    ++write_backs_;
    changed_.SignalAll();
  }
}

absl::Status StoreCore::Discard(TensorId id) {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, FindIdle(id));
  if (!rec->leases.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "tensor '%s' is leased: release it before Discard", rec->spec.name));
  }
  for (int t = 0; t < kNumTiers; ++t) {
    if (rec->copies[t].state == CopyState::kValid) {
      DropCopy(*rec, static_cast<Tier>(t), /*eviction=*/false);
    }
  }
  rec->has_contents = false;
  return absl::OkStatus();
}

}  // namespace strata
