// residency.cc: how StoreCore moves copies between tiers — filling a copy,
// choosing its source, making room by eviction (Belady or LRU), and writing
// dirty copies back. Every function here may release mu_ while a transfer runs;
// the copies involved are marked loading/evicting (and sources pinned)
// meanwhile, which keeps the record alive and its bytes stable.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/byte_size.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {
namespace {}  // namespace

absl::Status StoreCore::FillCopy(TensorRecord& rec, Tier tier, Fill fill,
                                 uint64_t protect_within, bool demand,
                                 bool stream_ordered) {
  TierCopy& copy = rec.copy(tier);
  if (unified() && tier == Tier::kDevice) {
    STRATA_RETURN_IF_ERROR(
        FillUnifiedDevice(rec, fill, protect_within, demand));
    copy.last_use = ++tick_;
    return absl::OkStatus();
  }
  if (!copy.extent) {
    absl::StatusOr<Extent> extent =
        AllocateOn(tier, rec.spec.size_bytes, rec.spec, protect_within);
    if (!extent.ok()) {
      AbandonCopy(rec, tier);
      return extent.status();
    }
    copy.extent = *extent;
  }
  absl::Status status;
  if (fill == Fill::kLoad) {
    status = LoadFromNearest(rec, tier, stream_ordered);
  } else if (fill == Fill::kZero) {
    const Place place{tier, *copy.extent};
    MutexUnlock unlocked(&mu_);
    status = mover_->Zero(place, rec.spec.size_bytes);
  }
  if (!status.ok()) {
    AbandonCopy(rec, tier);
    return status;
  }
  copy.last_use = ++tick_;
  return absl::OkStatus();
}

absl::Status StoreCore::LoadFromNearest(TensorRecord& rec, Tier tier,
                                        bool stream_ordered) {
  while (true) {
    if (std::optional<Tier> src = PickSource(rec, tier)) {
      if (StageOnHost(rec, tier, *src)) {
        TierCopy& host = rec.copy(Tier::kHost);
        host.MoveTo(CopyState::kLoading);
        const absl::Status staged = FillCopy(rec, Tier::kHost, Fill::kLoad);
        if (staged.ok()) {
          host.MoveTo(CopyState::kValid);
          Changed();
          continue;  // now from the host copy
        }
        // No room in host memory: straight from NVMe, as without staging.
        if (staged.code() != absl::StatusCode::kResourceExhausted) {
          return staged;
        }
      }
      if (stream_ordered && tier == Tier::kDevice && *src == Tier::kHost &&
          !unified()) {
        return LoadQueued(rec);
      }
      return Transfer(rec, *src, tier);
    }
    bool evicting = false;
    for (const TierCopy& c : rec.copies) {
      evicting = evicting || c.state() == CopyState::kEvicting;
    }
    if (!evicting) {
      return absl::InternalError(absl::StrFormat(
          "tensor '%s' has contents but no valid copy (store bug)",
          rec.spec.name));
    }
    changed_.Wait(&mu_);  // a write-back is moving the only copy; read it after
  }
}

absl::Status StoreCore::LoadQueued(TensorRecord& rec) {
  TierCopy& host = rec.copy(Tier::kHost);
  TierCopy& device = rec.copy(Tier::kDevice);
  const Place src{Tier::kHost, *host.extent};
  const Place dst{Tier::kDevice, *device.extent};
  ++host.transfer_pins;
  absl::StatusOr<QueuedCopy> queued;
  {
    // On the simulated device the copy itself runs here: not under mu_.
    MutexUnlock unlocked(&mu_);
    queued =
        mover_->StartHostToDevice(src, dst, rec.spec.size_bytes, rec.spec.name);
  }
  if (!queued.ok()) {
    return EndTransfer(rec, Tier::kHost, Tier::kDevice, queued.status(), 0);
  }
  if (queued->event->Done()) {  // already there (asked once): no reaper
    const absl::Status copied = queued->event->Synchronize();
    mover_->EndQueued(*queued, copied.ok());
    return EndTransfer(rec, Tier::kHost, Tier::kDevice, copied, 0);
  }
  device.release_event = queued->event;
  device.queued_load = queued->event;
  ++queued_loads_;
  ++queued_loads_total_;
  if (reaper_ == nullptr) reaper_ = std::make_unique<EventReaper>();
  reaper_->Add(queued->event,
               [this, id = rec.id, copy = *queued](absl::Status status) {
                 MutexLock lock(&mu_);
                 EndQueuedLoad(id, copy, status);
               });
  return absl::OkStatus();
}

void StoreCore::EndQueuedLoad(TensorId id, const QueuedCopy& copy,
                              const absl::Status& status) {
  mover_->EndQueued(copy, status.ok());
  --queued_loads_;
  Changed();
  // The pinned host copy kept the record (Destroy waits for idle copies).
  TensorRecord& rec = *tensors_.at(id);
  --rec.copy(Tier::kHost).transfer_pins;
  TierCopy& device = rec.copy(Tier::kDevice);
  const bool still_there = device.queued_load == copy.event;  // not dropped
  if (still_there) device.queued_load.reset();
  if (status.ok()) return;
  const std::string what = absl::StrFormat(
      "the host -> device copy of tensor '%s' for a stream-ordered acquire "
      "failed after the acquire returned",
      rec.spec.name);
  if (still_there && device.leased()) {
    // Its leases learn it at their releases; the last one drops it.
    device.load_error =
        absl::Status(status.code(),
                     absl::StrFormat("%s (this lease's device bytes were "
                                     "undefined; the host copy is intact): %s",
                                     what, status.message()));
    return;
  }
  if (still_there) DropCopy(rec, Tier::kDevice, /*eviction=*/false);
  rec.queued_load_error = absl::Status(
      status.code(),
      absl::StrFormat("%s (the device bytes its leases read were undefined; "
                      "the host copy is intact): %s",
                      what, status.message()));
}

absl::Status StoreCore::TakeQueuedLoadError(TensorRecord& rec) {
  absl::Status error = std::move(rec.queued_load_error);
  rec.queued_load_error = absl::OkStatus();
  return error;
}

bool StoreCore::StageOnHost(const TensorRecord& rec, Tier tier,
                            Tier src) const {
  return tier == Tier::kDevice && src == Tier::kNvme && !unified() &&
         rec.spec.size_bytes < kSmallCopyBytes &&
         rec.copy(Tier::kHost).state() == CopyState::kAbsent;
}

std::optional<Tier> StoreCore::PickSource(const TensorRecord& rec,
                                          Tier tier) const {
  // Nearest first: a host copy feeds the device faster than NVMe does, and a
  // device copy feeds the host faster than NVMe does.
  static constexpr Tier kOrder[kNumTiers][2] = {{Tier::kHost, Tier::kNvme},
                                                {Tier::kDevice, Tier::kNvme},
                                                {Tier::kHost, Tier::kDevice}};
  for (Tier src : kOrder[static_cast<int>(tier)]) {
    // Unified memory: the device copy is the host copy, never a source.
    if (unified() && src == Tier::kDevice) continue;
    // A device copy whose stream-ordered load failed holds undefined bytes.
    if (!rec.copy(src).load_error.ok()) continue;
    if (rec.copy(src).state() == CopyState::kValid) return src;
  }
  return std::nullopt;
}

Placement PlacementFor(Tier tier, const TensorSpec& spec, uint64_t capacity) {
  if (tier == Tier::kNvme) return Placement::kBestFit;
  const bool state = spec.kind == TensorKind::kParameter ||
                     spec.kind == TensorKind::kGradient ||
                     spec.kind == TensorKind::kOptimizerState;
  return state && spec.size_bytes >= capacity / 16 ? Placement::kHigh
                                                   : Placement::kLow;
}

StoreCore::Room StoreCore::MakeRoom(Tier tier, uint64_t bytes,
                                    const TensorSpec& spec,
                                    uint64_t protect_within, bool explain) {
  if (alloc(tier).RoundUp(bytes) > capacity_[static_cast<int>(tier)]) {
    return Room::Failed(TooLarge(tier, bytes, spec));
  }
  while (true) {
    if (closed_) {
      return Room::Failed(absl::FailedPreconditionError("the store is closed"));
    }
    if (std::optional<Extent> e = alloc(tier).Allocate(
            bytes, PlacementFor(tier, spec, alloc(tier).capacity()))) {
      return {.kind = Room::kReserved, .extent = *e};
    }
    // Write-backs in flight (WriteBackMore's) will leave room enough: wait
    // for them rather than evict one more. (With none in flight the trial is
    // the allocator that just failed: not copied.)
    std::optional<ExtentAllocator> trial;
    if (HasEvictingCopy(tier)) {
      trial.emplace(TrialAfterEvictions(tier));
      if (trial->largest_free_bytes() >= alloc(tier).RoundUp(bytes)) {
        return {.kind = Room::kWait};
      }
    }
    if (TensorRecord* victim =
            PickRoomVictim(tier, trial.has_value() ? *trial : alloc(tier),
                           bytes, protect_within)) {
      // Unified memory: a device victim ends its residency; a host victim
      // first takes its pages off the device.
      if (unified() &&
          victim->copy(Tier::kDevice).state() == CopyState::kValid) {
        return {.kind = Room::kEvictUnified, .victim = victim};
      }
      // An eviction that costs bytes (a write-back, or a reload the plan
      // does not expect) gives way to moving idle copies when the tier's
      // free bytes are enough but split; a drop the plan expects does not.
      const bool dirty = victim->has_contents && victim->dirty(tier);
      if ((dirty || PlanKeeps(*victim, tier)) && Compact(tier, bytes)) {
        continue;
      }
      if (dirty) return {.kind = Room::kWriteBack, .victim = victim};
      DropCopy(*victim, tier, /*eviction=*/true);
      continue;
    }
    if (Compact(tier, bytes)) continue;
    if (!TransfersInFlight(tier) && !WriteBackInFlight(tier)) {
      Room full =
          Room::Failed(explain ? TierFull(tier, bytes, spec)
                               : absl::ResourceExhaustedError(absl::StrFormat(
                                     "%s tier full", TierName(tier))));
      full.tier_full = true;
      return full;
    }
    // A load or eviction in flight will free or unpin space.
    return {.kind = Room::kWait};
  }
}

absl::StatusOr<Extent> StoreCore::AllocateOn(Tier tier, uint64_t bytes,
                                             const TensorSpec& spec,
                                             uint64_t protect_within) {
  const absl::Time start = absl::Now();
  bool made_room = false;
  absl::StatusOr<Extent> extent =
      AllocateMakingRoom(tier, bytes, spec, protect_within, &made_room);
  if (made_room) room_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  return extent;
}

absl::StatusOr<Extent> StoreCore::AllocateMakingRoom(Tier tier, uint64_t bytes,
                                                     const TensorSpec& spec,
                                                     uint64_t protect_within,
                                                     bool* made_room) {
  while (true) {
    Room room = MakeRoom(tier, bytes, spec, protect_within);
    // Clean victims MakeRoom dropped cost no wait: only the other kinds
    // count as making room.
    if (room.kind != Room::kReserved && room.kind != Room::kFailed) {
      *made_room = true;
    }
    switch (room.kind) {
      case Room::kReserved:
        return room.extent;
      case Room::kFailed:
        return room.status;
      case Room::kEvictUnified:
        EvictUnified(*room.victim);
        break;
      case Room::kWriteBack: {
        TensorRecord& victim = *room.victim;
        const Tier target = BeginWriteBack(victim, tier);
        WriteBackMore(tier, bytes, protect_within);
        STRATA_RETURN_IF_ERROR(
            EndWriteBack(victim, tier, target, Transfer(victim, tier, target)));
        break;
      }
      case Room::kWait:
        changed_.Wait(&mu_);
        break;
    }
  }
}

// A dirty copy on `tier` whose home copy is being filled (a write-back to a
// lower tier in flight): PickVictim skips it now, but it becomes evictable
// when that transfer ends, so an allocation should wait rather than fail.
bool StoreCore::WriteBackInFlight(Tier tier) const {
  for (const auto& [id, rec] : tensors_) {
    const TierCopy& c = rec->copy(tier);
    if (c.state() == CopyState::kValid && !c.leased() && rec->dirty(tier) &&
        rec->has_contents && !rec->is_home(tier) &&
        rec->copy(rec->spec.home).busy()) {
      return true;
    }
  }
  return false;
}

bool StoreCore::TransfersInFlight(Tier tier) const {
  for (const auto& [id, rec] : tensors_) {
    const TierCopy& c = rec->copy(tier);
    if (c.extent && c.busy()) return true;
  }
  return false;
}

bool StoreCore::HasEvictingCopy(Tier tier) const {
  for (const auto& [id, rec] : tensors_) {
    if (rec->copy(tier).state() == CopyState::kEvicting &&
        !rec->is_home(tier)) {
      return true;
    }
  }
  return false;
}

ExtentAllocator StoreCore::TrialAfterEvictions(Tier tier) const {
  ExtentAllocator trial = *alloc_[static_cast<int>(tier)];
  for (const auto& [id, rec] : tensors_) {
    const TierCopy& c = rec->copy(tier);
    if (c.state() == CopyState::kEvicting && !rec->is_home(tier)) {
      trial.Free(*c.extent);
    }
  }
  return trial;
}

void StoreCore::WriteBackMore(Tier tier, uint64_t bytes,
                              uint64_t protect_within) {
  // The trial allocator tells when the victims freed so far leave a range
  // that fits `bytes` (the arena may be fragmented, so counting free bytes
  // is not enough).
  ExtentAllocator trial = TrialAfterEvictions(tier);
  const uint64_t want = trial.RoundUp(bytes);
  while (trial.largest_free_bytes() < want) {
    TensorRecord* victim = PickRoomVictim(tier, trial, bytes, protect_within);
    // Unified residency ends by hints, one at a time, in MakeRoom's loop.
    if (victim == nullptr ||
        (unified() &&
         victim->copy(Tier::kDevice).state() == CopyState::kValid)) {
      return;
    }
    trial.Free(*victim->copy(tier).extent);
    if (!victim->has_contents || !victim->dirty(tier)) {
      DropCopy(*victim, tier, /*eviction=*/true);
      continue;
    }
    ++companions_in_flight_;  // Shutdown waits for them
    WriteBackAsync(*victim, tier,
                   [this](const absl::Status&)
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                         --companions_in_flight_;
                         Changed();
                       });
  }
}

Tier StoreCore::BeginWriteBack(TensorRecord& rec, Tier tier, bool to_home) {
  rec.copy(tier).MoveTo(CopyState::kEvicting);
  const Tier target = to_home ? rec.spec.home : WriteBackTarget(rec, tier);
  rec.copy(target).MoveTo(CopyState::kLoading);
  return target;
}

absl::Status StoreCore::EndWriteBack(TensorRecord& rec, Tier tier, Tier target,
                                     const absl::Status& moved) {
  TierCopy& src = rec.copy(tier);
  TierCopy& dst = rec.copy(target);
  src.MoveTo(CopyState::kValid);
  if (!moved.ok()) {
    AbandonCopy(rec, target);
    Changed();
    return moved;
  }
  dst.MoveTo(CopyState::kValid);
  dst.last_use = src.last_use;  // keep its age: it was not used, just moved
  ++write_backs_;
  DropCopy(rec, tier, /*eviction=*/true);
  return absl::OkStatus();
}

Tier StoreCore::WriteBackTarget(TensorRecord& rec, Tier tier) {
  const Tier home = rec.spec.home;
  // The host copy may be reserved by a load in progress (kLoading, no extent
  // yet): then it is not ours to fill.
  if (tier != Tier::kDevice || home != Tier::kNvme ||
      rec.copy(Tier::kHost).state() != CopyState::kAbsent) {
    return home;
  }
  // Device copy of an NVMe-homed tensor: keep it in host memory if room can
  // be made without I/O (dropping clean copies only), else write to NVMe.
  const uint64_t bytes = rec.spec.size_bytes;
  while (true) {
    if (std::optional<Extent> e =
            alloc(Tier::kHost)
                .Allocate(bytes, PlacementFor(Tier::kHost, rec.spec,
                                              alloc(Tier::kHost).capacity()))) {
      rec.copy(Tier::kHost).extent = *e;
      return Tier::kHost;
    }
    if (Compact(Tier::kHost, bytes)) continue;
    // Only copies needed later than this one: a write-back must not push
    // out what a prefetch just brought for an earlier access.
    TensorRecord* victim = PickVictim(Tier::kHost, NextUseDistance(rec));
    if (victim == nullptr ||
        (victim->has_contents && victim->dirty(Tier::kHost))) {
      return home;
    }
    DropCopy(*victim, Tier::kHost, /*eviction=*/true);
  }
}

absl::Status StoreCore::Transfer(TensorRecord& rec, Tier src, Tier dst) {
  MoveRequest request = BeginTransfer(rec, src, dst);
  absl::Status status;
  {
    MutexUnlock unlocked(&mu_);
    status =
        mover_->Move(request.src, request.dst, request.bytes, &request.checksum,
                     request.after.get(), request.label);
  }
  return EndTransfer(rec, src, dst, status, request.checksum);
}

MoveRequest StoreCore::BeginTransfer(TensorRecord& rec, Tier src, Tier dst) {
  TierCopy& from = rec.copy(src);
  ++from.transfer_pins;
  return MoveRequest{
      .src = {src, *from.extent},
      .dst = {dst, *rec.copy(dst).extent},
      .bytes = rec.spec.size_bytes,
      .checksum = rec.nvme_checksum,
      .after = src == Tier::kDevice ? from.release_event : nullptr,
      .label = rec.spec.name};
}

absl::Status StoreCore::EndTransfer(TensorRecord& rec, Tier src, Tier dst,
                                    const absl::Status& status,
                                    uint64_t checksum) {
  --rec.copy(src).transfer_pins;
  if (status.ok() && dst == Tier::kNvme) rec.nvme_checksum = checksum;
  Changed();
  if (!status.ok()) {
    return absl::Status(
        status.code(),
        absl::StrFormat("moving tensor '%s' %s -> %s: %s", rec.spec.name,
                        TierName(src), TierName(dst), status.message()));
  }
  return absl::OkStatus();
}

void StoreCore::DropCopy(TensorRecord& rec, Tier tier, bool eviction) {
  TierCopy& c = rec.copy(tier);
  if (eviction) {
    ++evictions_[static_cast<int>(tier)];
    if (c.prefetched) ++prefetch_.wasted;
  }
  c.MoveTo(CopyState::kAbsent);
  c.prefetched = false;
  if (tier == Tier::kHost && !rec.is_home(tier)) ForgetReadMostly(rec);
  if (!rec.is_home(tier) && c.extent) {
    if (tier == Tier::kDevice) AwaitDeviceReaders(c);
    alloc(tier).Free(*c.extent);
    c.extent.reset();
  }
  c.release_event.reset();
  c.queued_load.reset();
  c.load_error = absl::OkStatus();
  Changed();
}

void StoreCore::AwaitDeviceReaders(const TierCopy& c) {
  if (c.release_event == nullptr || c.release_event->Done()) return;
  ++device_reader_waits_;
  // An error here is the kernels' own (a failed launch, a sticky CUDA
  // error): nothing runs on the memory any more, so it may be reused.
  c.release_event->Synchronize().IgnoreError();
}

void StoreCore::DropOthers(TensorRecord& rec, Tier keep) {
  for (int t = 0; t < kNumTiers; ++t) {
    // Unified memory: the host copy holds the device copy's bytes.
    if (unified() && keep == Tier::kDevice && t == 1) continue;
    if (t != static_cast<int>(keep) &&
        rec.copies[t].state() == CopyState::kValid) {
      DropCopy(rec, static_cast<Tier>(t), /*eviction=*/false);
    }
  }
}

void StoreCore::AbandonCopy(TensorRecord& rec, Tier tier) {
  TierCopy& c = rec.copy(tier);
  c.MoveTo(CopyState::kAbsent);
  if (tier == Tier::kHost && !rec.is_home(tier) && c.extent) {
    ForgetReadMostly(rec);
  }
  if (!rec.is_home(tier) && c.extent) {
    alloc(tier).Free(*c.extent);
    c.extent.reset();
  }
  Changed();
}

}  // namespace strata
