// store_core.cc: StoreCore's public operations: argument checks, lease rules
// and the acquire paths. Moving copies between tiers is in residency.cc.
#include "src/store_core.h"

#include <cstring>
#include <optional>
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
  if (static_cast<int>(spec.home) >= kNumTiers ||
      static_cast<int>(spec.dtype) > static_cast<int>(DType::kInt64) ||
      static_cast<int>(spec.kind) > static_cast<int>(TensorKind::kOther)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has an out-of-range home (%d), dtype (%d) or kind (%d)",
        spec.name, static_cast<int>(spec.home), static_cast<int>(spec.dtype),
        static_cast<int>(spec.kind)));
  }
  if (spec.shape.empty()) return absl::OkStatus();
  uint64_t bytes = DTypeSize(spec.dtype);
  for (int64_t d : spec.shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s' has a negative extent %d in its shape", spec.name, d));
    }
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s': its shape's byte count overflows 64 bits", spec.name));
    }
  }
  if (bytes != spec.size_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': its shape holds %d bytes of %s but size_bytes is %d",
        spec.name, bytes, DTypeName(spec.dtype), spec.size_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

StoreCore::StoreCore(const StoreOptions& options, TierSet tiers)
    : options_(options), tiers_(std::move(tiers)) {
  capacity_[0] = options_.device.budget_bytes;
  capacity_[1] = tiers_.host->size_bytes();
  capacity_[2] = tiers_.nvme ? tiers_.nvme->capacity_bytes() : 0;
  alloc_[0].emplace(capacity_[0], kDeviceAllocationGranuleBytes);
  alloc_[1].emplace(capacity_[1], kHostAllocationGranuleBytes);
  alloc_[2].emplace(capacity_[2], kNvmeAllocationGranuleBytes);
  if (options_.timeline) timeline_ = std::make_unique<Timeline>();
  // One transfer thread per prefetch job that may run (each job has at most
  // one transfer in flight); one executor thread, whose handlers never wait.
  mover_ = std::make_unique<Mover>(
      tiers_.device.get(), tiers_.device_base, tiers_.host->base(),
      tiers_.nvme.get(), tiers_.bounce.get(), timeline_.get(),
      tiers_.host->managed(), options_.scheduler.prefetch_threads);
  executor_ = std::make_unique<boost::asio::thread_pool>(1);
}

StoreCore::~StoreCore() { Shutdown(); }

void StoreCore::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    Changed();
    // Queued jobs end at their first step (the store is closed); started
    // ones once their transfer in flight completes.
    while (prefetch_jobs_ > 0 || !prefetch_queue_.empty()) changed_.Wait(&mu_);
  }
  executor_->join();
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
  if (unified() && spec.home == Tier::kDevice) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s' has home device, but in unified-memory mode every "
        "tensor's pages live in managed host memory and migrate to the device "
        "on use: give it home host (it is prefetched before each use), or "
        "open the store with explicit copies",
        spec.name));
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
  ForgetReadMostly(*rec);
  for (int t = 0; t < kNumTiers; ++t) {
    TierCopy& c = rec->copies[t];
    if (c.extent) alloc(static_cast<Tier>(t)).Free(*c.extent);
  }
  tensors_.erase(id);
  Changed();
  return absl::OkStatus();
}

absl::StatusOr<Lease> StoreCore::Acquire(TensorId id, Tier tier, Access access,
                                         void* stream) {
  const absl::Time start = absl::Now();
  MutexLock lock(&mu_);
  if (static_cast<int>(access) > static_cast<int>(Access::kOverwrite)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("access %d is not kRead, kWrite or kOverwrite",
                        static_cast<int>(access)));
  }
  ObserveAndPrefetch(id, tier, access);
  bool stalled = false;
  absl::StatusOr<Lease> lease =
      access == Access::kRead
          ? AcquireShared(id, tier, stream, &stalled)
          : AcquireExclusive(id, tier, access, stream, &stalled);
  if (lease.ok()) CountAcquire(start, stalled);
  return lease;
}

void StoreCore::CountAcquire(absl::Time start, bool stalled) {
  ++acquires_;
  if (!stalled) return;
  ++stalled_acquires_;
  stall_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
}

absl::StatusOr<Lease> StoreCore::AcquireShared(TensorId id, Tier tier,
                                               void* stream, bool* stalled) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
    STRATA_RETURN_IF_ERROR(CheckConflict(*rec, tier, Access::kRead));
    TierCopy& copy = rec->copy(tier);
    if (tier == Tier::kHost && ShouldEvictForHost(*rec) &&
        !rec->exclusive_pending) {
      *stalled = true;
      EvictUnified(*rec);  // the CPU reads its pages where they are
      continue;
    }
    if (copy.state == CopyState::kValid && !rec->exclusive_pending) {
      return Grant(*rec, tier, Access::kRead, stream);
    }
    CountLatePrefetch(copy);
    if (copy.state != CopyState::kAbsent || rec->exclusive_pending) {
      *stalled = true;
      changed_.Wait(&mu_);
      continue;
    }
    *stalled = true;
    copy.state = CopyState::kLoading;
    STRATA_RETURN_IF_ERROR(FillCopy(*rec, tier, Fill::kLoad));
    copy.state = CopyState::kValid;
    Changed();
  }
}

absl::StatusOr<Lease> StoreCore::AcquireExclusive(TensorId id, Tier tier,
                                                  Access access, void* stream,
                                                  bool* stalled,
                                                  const UserBytes* user) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
    STRATA_RETURN_IF_ERROR(CheckConflict(*rec, tier, access));
    if (rec->any_busy() || rec->exclusive_pending) {
      *stalled = true;
      changed_.Wait(&mu_);
      continue;
    }
    if (tier == Tier::kHost && ShouldEvictForHost(*rec)) {
      // The CPU writes its pages where they are; an overwrite's old
      // contents are dead and need not come back.
      *stalled = true;
      EvictUnified(
          *rec, /*contents_dead=*/access == Access::kOverwrite &&
                    (user == nullptr || user->bytes == rec->spec.size_bytes));
      continue;
    }
    TierCopy& copy = rec->copy(tier);
    const bool was_valid = copy.state == CopyState::kValid;
    if (was_valid && user == nullptr) return Grant(*rec, tier, access, stream);
    CountLatePrefetch(copy);
    const bool only_copy = rec->dirty(tier);  // before the state changes
    // An overwrite moves no bytes of its own; it stalls only if making room
    // wrote something back.
    const uint64_t write_backs_before = write_backs_;
    const bool moves_bytes = access != Access::kOverwrite || user != nullptr;
    copy.state = CopyState::kLoading;
    rec->exclusive_pending = true;  // new readers wait; no conflict can arise
    absl::Status prepared =
        PrepareExclusive(*rec, tier, access, was_valid, only_copy, user);
    if (moves_bytes || write_backs_ != write_backs_before) *stalled = true;
    rec->exclusive_pending = false;
    Changed();
    STRATA_RETURN_IF_ERROR(prepared);
    copy.state = CopyState::kValid;
    return Grant(*rec, tier, access, stream);
  }
}

absl::Status StoreCore::PrepareExclusive(TensorRecord& rec, Tier tier,
                                         Access access, bool was_valid,
                                         bool only_copy,
                                         const UserBytes* user) {
  if (!was_valid) {
    Fill fill = Fill::kNone;
    if (access == Access::kWrite) {
      fill = rec.has_contents ? Fill::kLoad : Fill::kZero;
    }
    STRATA_RETURN_IF_ERROR(FillCopy(rec, tier, fill));
  } else if (only_copy && tier == Tier::kDevice && user != nullptr) {
    // User bytes would go in place over the only copy, and a failed device
    // copy would tear it: save it to the home tier first, or, when the device
    // is its home, write a fresh copy beside it.
    if (!rec.is_home(tier)) {
      STRATA_RETURN_IF_ERROR(SaveToHome(rec, tier));
    } else if (std::optional<absl::Status> done = WriteBeside(rec, *user)) {
      return *done;
    }
  }
  if (user != nullptr) {
    absl::Status copied = CopyUserBytes(rec, tier, *user);
    if (!copied.ok()) return FailedUserCopy(rec, tier, copied);
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

absl::Status StoreCore::SaveToHome(TensorRecord& rec, Tier tier) {
  const Tier home = rec.spec.home;
  rec.copy(home).state = CopyState::kLoading;
  absl::Status saved = Transfer(rec, tier, home);
  rec.copy(home).state = saved.ok() ? CopyState::kValid : CopyState::kAbsent;
  if (!saved.ok()) rec.copy(tier).state = CopyState::kValid;
  return saved;
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
  if (status.ok()) copy.extent = *fresh;
  alloc(Tier::kDevice).Free(drop);
  if (!status.ok()) copy.state = CopyState::kValid;  // the old copy is intact
  Changed();
  return status;
}

absl::Status StoreCore::FailedUserCopy(TensorRecord& rec, Tier tier,
                                       const absl::Status& error) {
  bool other_valid = false;
  for (int t = 0; t < kNumTiers; ++t) {
    other_valid |=
        t != static_cast<int>(tier) && rec.copies[t].state == CopyState::kValid;
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
    // Writes between steps (initialisation, Store::Write of inputs) do not
    // make a tensor "written during the step".
    if (in_step_) ++rec.writes_this_step;
    ForgetReadMostly(rec);  // writes to read-mostly pages collapse duplicates
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
  rec.leases.emplace(token, LeaseGrant{tier, access, absl::Now()});
  return MakeLease(weak_from_this(), rec.id, tier, access,
                   DataPointer(rec, tier), rec.spec.size_bytes, token);
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
  if (timeline_ != nullptr) {
    timeline_->Record(
        absl::StrFormat("%s (%s)", rec.spec.name, AccessName(grant.access)),
        absl::StrFormat("lease %s", TierName(grant.tier)), grant.granted,
        absl::Now());
  }
  TierCopy& copy = rec.copy(grant.tier);
  if (grant.access == Access::kRead) {
    --copy.read_leases;
  } else {
    copy.write_lease = false;
  }
  if (!copy.leased())
    leased_bytes_[static_cast<int>(grant.tier)] -= copy.extent->bytes;
  Changed();
  if (grant.tier != Tier::kDevice || closed_) return absl::OkStatus();
  // Later copies out of this tier wait for the caller's work on `stream`.
  STRATA_ASSIGN_OR_RETURN(copy.release_event,
                          tiers_.device->RecordEvent(stream));
  return absl::OkStatus();
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
    if (to_tier != Tier::kDevice && ShouldEvictForHost(*rec)) {
      EvictUnified(*rec);  // unified memory: pages back to the host first
      continue;
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
    Changed();
  }
}

absl::Status StoreCore::Discard(TensorId id) {
  MutexLock lock(&mu_);
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, FindIdle(id));
    if (!rec->leases.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "tensor '%s' is leased: release it before Discard", rec->spec.name));
    }
    if (ShouldEvictForHost(*rec)) {
      // Unified memory: the dead pages are discarded, never to cross the
      // link again (after the kernels still using them); then look again.
      EvictUnified(*rec, /*contents_dead=*/true);
      continue;
    }
    for (int t = 0; t < kNumTiers; ++t) {
      if (rec->copies[t].state == CopyState::kValid) {
        DropCopy(*rec, static_cast<Tier>(t), /*eviction=*/false);
      }
    }
    rec->has_contents = false;
    return absl::OkStatus();
  }
}

}  // namespace strata
