// acquire.cc: the acquire paths. A shared (read) acquire waits for or makes
// a valid copy on the tier and pins it; an exclusive (write, overwrite)
// acquire first builds its copy beside the old contents, so that a failure
// leaves them intact, then makes the other copies stale. Release records the
// lease's end (on a GPU, an event on the caller's stream that evictions wait
// for).
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {

absl::StatusOr<Lease> StoreCore::Acquire(TensorId id, Tier tier, Access access,
                                         void* stream) {
  return AcquireLease(id, tier, access, stream, /*report_failed_load=*/true);
}

absl::StatusOr<Lease> StoreCore::AcquireLease(TensorId id, Tier tier,
                                              Access access, void* stream,
                                              bool report_failed_load) {
  const absl::Time start = absl::Now();
  MutexLock lock(&mu_);
  if (auto it = tensors_.find(id); report_failed_load && it != tensors_.end() &&
                                   !it->second->queued_load_error.ok()) {
    return TakeQueuedLoadError(*it->second);
  }
  if (static_cast<int>(access) > static_cast<int>(Access::kOverwrite)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("access %d is not kRead, kWrite or kOverwrite",
                        static_cast<int>(access)));
  }
  const PredictedUse use = ObserveAndPrefetch(id, tier, access);
  bool stalled = false;
  absl::StatusOr<Lease> lease =
      access == Access::kRead
          ? AcquireShared(id, tier, stream, &stalled, use)
          : AcquireExclusive(id, tier, access, stream, &stalled, nullptr, use);
  if (lease.ok()) {
    tensors_.at(id)->last_use = use;
    CountAcquire(id, tier, start, stalled);
  }
  return lease;
}

void StoreCore::CountAcquire(TensorId id, Tier tier, absl::Time start,
                             bool stalled) {
  ++acquires_;
  if (!stalled) return;
  ++stalled_acquires_;
  const absl::Time end = absl::Now();
  stall_seconds_ += absl::ToDoubleSeconds(end - start);
  // A stall span per waiting acquire: the timeline shows which tensor the
  // step waited for, and for how long.
  if (timeline_ != nullptr) {
    timeline_->Record(tensors_.at(id)->spec.name,
                      absl::StrFormat("stall %s", TierName(tier)), start, end);
  }
}

absl::StatusOr<Lease> StoreCore::AcquireShared(TensorId id, Tier tier,
                                               void* stream, bool* stalled,
                                               const PredictedUse& use) {
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
    // A copy whose stream-ordered load failed waits for its last lease to
    // drop it; then the load runs again.
    if (copy.state() == CopyState::kValid && !rec->exclusive_pending &&
        copy.load_error.ok()) {
      return Grant(*rec, tier, Access::kRead, stream, use);
    }
    CountLatePrefetch(copy);
    if (copy.state() != CopyState::kAbsent || rec->exclusive_pending) {
      *stalled = true;
      WaitForCopy(id, tier);
      continue;
    }
    *stalled = true;
    copy.MoveTo(CopyState::kLoading);
    // A device copy from the host copy: the lease's stream waits for it.
    STRATA_RETURN_IF_ERROR(FillCopy(*rec, tier, Fill::kLoad,
                                    /*protect_within=*/0, /*demand=*/true,
                                    /*stream_ordered=*/true));
    copy.MoveTo(CopyState::kValid);
    Changed();
  }
}

absl::StatusOr<Lease> StoreCore::AcquireExclusive(TensorId id, Tier tier,
                                                  Access access, void* stream,
                                                  bool* stalled,
                                                  const UserBytes* user,
                                                  const PredictedUse& use) {
  while (true) {
    STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
    STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
    STRATA_RETURN_IF_ERROR(CheckConflict(*rec, tier, access));
    if (rec->any_busy() || rec->exclusive_pending) {
      *stalled = true;
      WaitForCopy(id, tier);
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
    const bool was_valid = copy.state() == CopyState::kValid;
    if (was_valid && user == nullptr) {
      return Grant(*rec, tier, access, stream, use);
    }
    CountLatePrefetch(copy);
    const bool only_copy = rec->dirty(tier);  // before the state changes
    // An overwrite moves no bytes of its own; it stalls only if making room
    // wrote something back.
    const uint64_t write_backs_before = write_backs_;
    const bool moves_bytes = access != Access::kOverwrite || user != nullptr;
    copy.MoveTo(CopyState::kLoading);
    rec->exclusive_pending = true;  // new readers wait; no conflict can arise
    absl::Status prepared =
        PrepareExclusive(*rec, tier, access, was_valid, only_copy, user);
    if (moves_bytes || write_backs_ != write_backs_before) *stalled = true;
    rec->exclusive_pending = false;
    Changed();
    STRATA_RETURN_IF_ERROR(prepared);
    copy.MoveTo(CopyState::kValid);
    return Grant(*rec, tier, access, stream, use);
  }
}

void StoreCore::WaitForCopy(TensorId id, Tier tier) {
  // Looked up again after the wait: the tensor may be destroyed meanwhile.
  if (auto it = tensors_.find(id); it != tensors_.end()) {
    ++it->second->copy(tier).acquires_waiting;
  }
  changed_.Wait(&mu_);
  if (auto it = tensors_.find(id); it != tensors_.end()) {
    --it->second->copy(tier).acquires_waiting;
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
  rec.copy(home).MoveTo(CopyState::kLoading);
  absl::Status saved = Transfer(rec, tier, home);
  rec.copy(home).MoveTo(saved.ok() ? CopyState::kValid : CopyState::kAbsent);
  if (!saved.ok()) rec.copy(tier).MoveTo(CopyState::kValid);
  return saved;
}

absl::StatusOr<Lease> StoreCore::Grant(TensorRecord& rec, Tier tier,
                                       Access access, void* stream,
                                       const PredictedUse& use) {
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
  rec.leases.emplace(token, LeaseGrant{tier, access, absl::Now(), use});
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
  predictor_.ObserveRelease(grant.use);
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
  if (copy.load_error.ok()) return absl::OkStatus();
  // This lease read a copy whose stream-ordered load failed.
  absl::Status error = copy.load_error;
  if (!copy.leased()) DropCopy(rec, Tier::kDevice, /*eviction=*/false);
  return error;
}

}  // namespace strata
