// store_core.cc: StoreCore's life cycle and the public operations on
// tensors (create, destroy, evict, discard) with their argument checks and
// lease rules. The acquire paths are in acquire.cc, moving copies between
// tiers in residency.cc.
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
  // one transfer in flight) and kWriteBackThreads for the write-backs that
  // make room together; one executor thread, whose handlers never wait.
  const int jobs = options_.scheduler.prefetch_threads > 0
                       ? options_.scheduler.prefetch_threads
                       : kAutoPrefetchJobs;
  prefetch_window_bytes_ =
      tiers_.nvme ? tiers_.nvme->block_size_bytes() : uint64_t{1} << 20;
  mover_ = std::make_unique<Mover>(
      tiers_.device.get(), tiers_.device_base, tiers_.host->base(),
      tiers_.nvme.get(), tiers_.bounce.get(), timeline_.get(),
      tiers_.host->managed(), jobs + kWriteBackThreads);
  executor_ = std::make_unique<boost::asio::thread_pool>(1);
}

StoreCore::~StoreCore() {
  Shutdown();
  // The transfer threads end before mu_ and the records go: a transfer's
  // continuation (ContinueHere) may still be releasing mu_ when the waits in
  // Shutdown see its job finished. The reaper has nothing left to wait for
  // (Shutdown waited for the queued loads); its thread ends first.
  reaper_.reset();
  mover_.reset();
}

void StoreCore::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    Changed();
    // Queued jobs end at their first step (the store is closed); started
    // ones once their transfer in flight completes, as do write-backs
    // started to make room together and stream-ordered loads.
    while (prefetch_jobs_ > 0 || !prefetch_queue_.empty() ||
           companions_in_flight_ > 0 || queued_loads_ > 0) {
      changed_.Wait(&mu_);
    }
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
    if (!c.extent) continue;
    if (t == static_cast<int>(Tier::kDevice)) AwaitDeviceReaders(c);
    alloc(static_cast<Tier>(t)).Free(*c.extent);
  }
  tensors_.erase(id);
  Changed();
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
      kept = kept || rec->copies[t].state() == CopyState::kValid;
    }
    if (kept) {
      for (int t = 0; t < static_cast<int>(to_tier); ++t) {
        if (rec->copies[t].state() == CopyState::kValid) {
          DropCopy(*rec, static_cast<Tier>(t), /*eviction=*/true);
        }
      }
      return absl::OkStatus();
    }
    // Write the contents down to `to_tier` first, then drop the faster copies.
    rec->copy(to_tier).MoveTo(CopyState::kLoading);
    STRATA_RETURN_IF_ERROR(FillCopy(*rec, to_tier, Fill::kLoad));
    rec->copy(to_tier).MoveTo(CopyState::kValid);
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
      if (rec->copies[t].state() == CopyState::kValid) {
        DropCopy(*rec, static_cast<Tier>(t), /*eviction=*/false);
      }
    }
    if (rec->has_contents) predictor_.ObserveDiscard(rec->last_use);
    rec->has_contents = false;
    // A failed stream-ordered load's report was about these contents.
    rec->queued_load_error = absl::OkStatus();
    return absl::OkStatus();
  }
}

}  // namespace strata
