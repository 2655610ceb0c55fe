// unified.cc: StoreCore's unified-memory mode (DeviceOptions::memory ==
// kUnified). The host tier is one managed allocation; a tensor's device copy
// is not a second extent but its host copy's pages resident on the GPU, so a
// lease hands out the same pointer on both tiers and the two copies always
// hold the same bytes (a device copy is never dirty). The device allocator
// only accounts residency against the device budget. Residency is driven by
// hints: a prefetch to the device ahead of use (the scheduler's prefetches
// and demand loads alike), a prefetch to the host to evict, a discard for
// dead contents, and read-mostly advice for tensors a step only reads. With
// hints off, pages move by faults alone (the baseline the hints beat).
//
// Invariant: a device copy that is not absent has a valid host copy, pinned
// (transfer_pins) while the device copy is being filled and marked evicting
// while its pages migrate back, so the host extent cannot be freed under it.
#include "absl/strings/str_format.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {

ManagedRange StoreCore::RangeOf(const TensorRecord& rec) const {
  return {mover_->Pointer({Tier::kHost, *rec.copy(Tier::kHost).extent}),
          rec.spec.size_bytes};
}

std::byte* StoreCore::DataPointer(const TensorRecord& rec, Tier tier) const {
  if (unified() && tier == Tier::kDevice) return RangeOf(rec).ptr;
  return mover_->Pointer({tier, *rec.copy(tier).extent});
}

absl::Status StoreCore::FillUnifiedDevice(TensorRecord& rec, Fill fill,
                                          uint64_t protect_within,
                                          bool demand) {
  TierCopy& host = rec.copy(Tier::kHost);
  // The device copy is the host copy's pages: they must be there first.
  while (host.state() == CopyState::kLoading ||
         host.state() == CopyState::kEvicting) {
    changed_.Wait(&mu_);
  }
  bool host_filled = false;  // holds no contents of the tensor yet
  if (host.state() == CopyState::kAbsent) {
    host.MoveTo(CopyState::kLoading);
    absl::Status loaded = FillCopy(rec, Tier::kHost, fill, protect_within);
    if (!loaded.ok()) {
      AbandonCopy(rec, Tier::kDevice);
      return loaded;
    }
    host.MoveTo(CopyState::kValid);
    host_filled = fill != Fill::kLoad;
    Changed();
  }
  auto abandon = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AbandonCopy(rec, Tier::kDevice);
    if (host_filled) AbandonCopy(rec, Tier::kHost);
  };
  ++host.transfer_pins;
  // Pages migrate whole: residency is charged for the host extent (whole
  // 4 KiB pages), not the tensor's byte size.
  absl::StatusOr<Extent> residency =
      AllocateOn(Tier::kDevice, host.extent->bytes, rec.spec, protect_within);
  if (!residency.ok()) {
    --host.transfer_pins;
    abandon();
    return residency.status();
  }
  rec.copy(Tier::kDevice).extent = *residency;
  const ManagedRange range = RangeOf(rec);
  absl::Status moved;
  {
    MutexUnlock unlocked(&mu_);
    // Dead contents (an overwrite) need not cross the link, with hints.
    moved =
        MoveUnifiedPages(range, /*discard=*/fill == Fill::kNone, rec.spec.name);
  }
  absl::Status filled = EndUnifiedFill(rec, fill, demand, moved);
  if (!filled.ok()) abandon();
  return filled;
}

absl::Status StoreCore::MoveUnifiedPages(const ManagedRange& range,
                                         bool discard,
                                         std::string_view label) const {
  return hints() ? mover_->Migrate(range, MemLocation::kDevice, discard,
                                   nullptr, label)
                 : mover_->ServeFault(range, MemLocation::kDevice, label);
}

absl::Status StoreCore::EndUnifiedFill(TensorRecord& rec, Fill fill,
                                       bool demand, const absl::Status& moved) {
  --rec.copy(Tier::kHost).transfer_pins;
  Changed();
  if (!moved.ok()) {
    return absl::Status(
        moved.code(),
        absl::StrFormat("moving tensor '%s' to the device (unified memory): %s",
                        rec.spec.name, moved.message()));
  }
  const bool discard = fill == Fill::kNone;
  if (hints()) {
    unified_.prefetches += discard ? 0 : 1;
    unified_.discards += discard ? 1 : 0;
  }
  if (demand && (!hints() || !discard)) {
    ++unified_.faults;
    unified_.fault_bytes += rec.spec.size_bytes;
  }
  AdviseReadMostly(rec);
  return absl::OkStatus();
}

void StoreCore::EvictUnified(TensorRecord& rec, bool contents_dead) {
  std::optional<UnifiedEviction> eviction =
      BeginEvictUnified(rec, contents_dead);
  if (!eviction.has_value()) {
    DropCopy(rec, Tier::kDevice, /*eviction=*/true);
    return;
  }
  absl::Status moved;
  {
    MutexUnlock unlocked(&mu_);
    moved = RunUnifiedEviction(*eviction);
  }
  EndEvictUnified(rec, *eviction, moved);
}

std::optional<StoreCore::UnifiedEviction> StoreCore::BeginEvictUnified(
    TensorRecord& rec, bool contents_dead) {
  TierCopy& device = rec.copy(Tier::kDevice);
  const bool live = rec.has_contents && !contents_dead;
  // Live pages come back over the link: by a prefetch with hints; without,
  // by the page faults of whoever touches them next on the host (charged
  // now). Read-mostly ones have a valid host duplicate; dead ones are
  // discarded.
  UnifiedEviction e{.range = RangeOf(rec),
                    .migrate = live && !rec.read_mostly,
                    .discard = hints() && !live,
                    .was_pending = rec.exclusive_pending,
                    .after = device.release_event,
                    .label = rec.spec.name};
  if (!e.migrate && !e.discard && e.after == nullptr) return std::nullopt;
  device.MoveTo(CopyState::kEvicting);
  ++rec.copy(Tier::kHost).transfer_pins;
  // Dead contents are about to be destroyed: no reader may be granted the
  // (still valid) host copy meanwhile.
  if (!live) rec.exclusive_pending = true;
  return e;
}

absl::Status StoreCore::RunUnifiedEviction(const UnifiedEviction& e) const {
  if (e.migrate && hints()) {
    return mover_->Migrate(e.range, MemLocation::kHost, /*discard=*/false,
                           e.after.get(), e.label);
  }
  // Kernels still using the pages on the caller's stream finish before the
  // CPU (or a discard) touches them.
  absl::Status moved;
  if (e.after != nullptr) moved = e.after->Synchronize();
  if (moved.ok() && e.migrate) {
    moved = mover_->ServeFault(e.range, MemLocation::kHost, e.label);
  }
  if (moved.ok() && e.discard) {
    moved = tiers_.device->DiscardManaged(absl::MakeConstSpan(&e.range, 1));
  }
  return moved;
}

void StoreCore::EndEvictUnified(TensorRecord& rec, const UnifiedEviction& e,
                                const absl::Status& moved) {
  // A failure is counted on the D2H link and otherwise ignored: the pages
  // stay coherent wherever the driver left them.
  --rec.copy(Tier::kHost).transfer_pins;
  rec.copy(Tier::kDevice).MoveTo(CopyState::kValid);
  rec.exclusive_pending = e.was_pending;
  Changed();
  if (moved.ok() && e.migrate && hints()) ++unified_.evictions;
  if (moved.ok() && e.discard) ++unified_.discards;
  DropCopy(rec, Tier::kDevice, /*eviction=*/true);
}

bool StoreCore::ShouldEvictForHost(const TensorRecord& rec) const {
  const TierCopy& device = rec.copy(Tier::kDevice);
  return unified() && device.state() == CopyState::kValid && !device.leased() &&
         device.transfer_pins == 0;
}

void StoreCore::AdviseReadMostly(TensorRecord& rec) {
  // An exclusive acquire is about to write it.
  if (!hints() || rec.read_mostly || rec.written_last_step ||
      rec.writes_this_step > 0 || rec.exclusive_pending) {
    return;
  }
  // Best effort: advice only changes how fast, never what is read.
  if (tiers_.device->AdviseManaged(RangeOf(rec), ManagedAdvice::kReadMostly)
          .ok()) {
    rec.read_mostly = true;
    ++unified_.read_mostly;
  }
}

void StoreCore::ForgetReadMostly(TensorRecord& rec) {
  if (!rec.read_mostly) return;
  rec.read_mostly = false;
  (void)tiers_.device->AdviseManaged(RangeOf(rec),
                                     ManagedAdvice::kUnsetReadMostly);
}

}  // namespace strata
