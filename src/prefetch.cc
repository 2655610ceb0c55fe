// prefetch.cc: StoreCore's prefetch jobs and the asynchronous transfers they
// start.
//
// A prefetch fills a copy exactly as FillCopy (and, for a unified-memory
// device copy, FillUnifiedDevice) does on an acquire's thread — reserve space
// (evicting by PickVictim, protecting copies needed sooner), then load from
// the nearest valid copy — but as a job on the executor: each step runs with
// mu_ held and ends where FillCopy would wait. A transfer (the load, or the
// write-back or migration that makes room) is handed to the Mover's transfer
// threads and its completion takes the next step there, with mu_ held (one
// thread handoff per transfer, not two); a wait for a transfer that another
// thread runs (room that a load in flight will free, a source being written
// back, a unified host copy being filled) parks the job until the next
// Changed(), the same signal the acquire threads wait on. The copy stays
// loading (so its record stays alive) until the job ends; on error it is absent
// again and the other copies are untouched, as on the synchronous path.
#include <boost/asio/post.hpp>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {

// The callbacks below that run on the executor (OnExecutor) or on a
// transfer thread (ContinueHere: the `then` of an asynchronous transfer)
// hold mu_; the analysis cannot see that through std::function, so they opt
// out of it.
void StoreCore::OnExecutor(std::function<void()> fn) {
  boost::asio::post(*executor_, [this, fn = std::move(fn)] {
    MutexLock lock(&mu_);
    fn();
  });
}

void StoreCore::ContinueHere(const std::function<void()>& fn) {
  MutexLock lock(&mu_);
  fn();
}

void StoreCore::Changed() {
  changed_.SignalAll();
  if (parked_.empty()) return;
  OnExecutor([this, jobs = std::exchange(parked_, {})]()
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                   for (const JobPtr& job : jobs) StepPrefetch(job);
                 });
}

void StoreCore::PumpPrefetches() {
  if (pumping_) return;  // a caller up the stack is pumping
  pumping_ = true;
  while (!prefetch_queue_.empty() &&
         MayStartPrefetch(*prefetch_queue_.front())) {
    JobPtr job = std::move(prefetch_queue_.front());
    prefetch_queue_.pop_front();
    ++prefetch_jobs_;
    prefetch_bytes_running_ += job->bytes;
    StepPrefetch(job);
  }
  pumping_ = false;
}

bool StoreCore::MayStartPrefetch(const PrefetchJob& next) const {
  const int fixed = options_.scheduler.prefetch_threads;
  if (fixed > 0) return prefetch_jobs_ < fixed;
  if (prefetch_jobs_ == 0) return true;
  return prefetch_jobs_ < kAutoPrefetchJobs &&
         prefetch_bytes_running_ + next.bytes <= prefetch_window_bytes_;
}

void StoreCore::FinishJob(const PrefetchJob& job) {
  --prefetch_jobs_;
  prefetch_bytes_running_ -= job.bytes;
  if (closed_) changed_.SignalAll();  // Shutdown waits for the last one
  PumpPrefetches();
}

void StoreCore::StepPrefetch(const JobPtr& job) {
  while (true) {
    const Next next = job->failure.ok()
                          ? StepOnce(job)
                          : FailPrefetch(*job, std::exchange(job->failure, {}));
    if (next == Next::kSuspended) return;
    if (next == Next::kFinished) {
      FinishJob(*job);
      return;
    }
  }
}

StoreCore::Next StoreCore::StepOnce(const JobPtr& job) {
  if (job->stage == Stage::kStart) return StartPrefetch(*job);
  if (job->stage == Stage::kHostWait) return WaitForHost(job);
  TensorRecord& rec = *tensors_.at(job->id);  // alive: its copy is loading
  switch (job->stage) {
    case Stage::kReserve: {
      std::optional<Extent>& extent = rec.copy(job->filling).extent;
      if (extent.has_value()) {  // a home copy keeps its space
        job->stage = Stage::kLoad;
        return Next::kContinue;
      }
      return Reserve(job, job->filling, rec.spec.size_bytes, &extent,
                     Stage::kLoad);
    }
    case Stage::kLoad:
      return StartLoad(job);
    case Stage::kLoaded:
      return Loaded(*job);
    case Stage::kReserveResidency:
      // Pages migrate whole: residency is charged for the host extent.
      return Reserve(job, Tier::kDevice, rec.copy(Tier::kHost).extent->bytes,
                     &rec.copy(Tier::kDevice).extent, Stage::kMigrate);
    case Stage::kMigrate:
      return StartMigration(job);
    case Stage::kMigrated:
      return EndPrefetch(*job, absl::OkStatus());
    default:
      break;
  }
  return FailPrefetch(*job, absl::InternalError("prefetch job in no stage"));
}

StoreCore::Next StoreCore::StartPrefetch(PrefetchJob& job) {
  absl::StatusOr<TensorRecord*> found = Find(job.id);
  if (!found.ok()) return Next::kFinished;  // destroyed meanwhile, or closing
  TensorRecord& rec = **found;
  TierCopy& copy = rec.copy(job.tier);
  if (!copy.prefetch_pending || copy.state() != CopyState::kAbsent) {
    return Next::kFinished;  // an acquire got there first (and counted it late)
  }
  if (!rec.has_contents || rec.write_leased() || rec.exclusive_pending ||
      prefetch_paused_) {
    copy.prefetch_pending = false;  // nothing to load, about to change, or
    return Next::kFinished;         // paused (PausePrefetch)
  }
  copy.MoveTo(CopyState::kLoading);
  ++prefetches_running_;
  job.stage = unified() && job.tier == Tier::kDevice ? Stage::kHostWait
                                                     : Stage::kReserve;
  return Next::kContinue;
}

// Unified memory: the device copy is the host copy's pages, which must be
// there first.
StoreCore::Next StoreCore::WaitForHost(const JobPtr& job) {
  TensorRecord& rec = *tensors_.at(job->id);
  TierCopy& host = rec.copy(Tier::kHost);
  if (host.state() == CopyState::kLoading ||
      host.state() == CopyState::kEvicting) {
    return Park(job);
  }
  if (host.state() == CopyState::kAbsent) {
    host.MoveTo(CopyState::kLoading);
    job->filling = Tier::kHost;
    job->stage = Stage::kReserve;
    return Next::kContinue;
  }
  ++host.transfer_pins;
  job->stage = Stage::kReserveResidency;
  return Next::kContinue;
}

StoreCore::Next StoreCore::Reserve(const JobPtr& job, Tier tier, uint64_t bytes,
                                   std::optional<Extent>* extent, Stage next) {
  TensorRecord& rec = *tensors_.at(job->id);
  // Never push out a copy needed before this one: then the prefetch waits
  // for a later acquire instead (not a failure). The distance is taken anew
  // each time: a parked job resumes after the cursor has moved on.
  job->protect = options_.scheduler.eviction == EvictionPolicy::kBelady
                     ? NextUseDistance(rec)
                     : 0;
  Room room = MakeRoom(tier, bytes, rec.spec, job->protect,
                       /*explain=*/false);
  Then retry = [this, job](const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                   mu_) { Resume(job, s, job->stage); };
  switch (room.kind) {
    case Room::kReserved:
      *extent = room.extent;
      job->stage = next;
      return Next::kContinue;
    case Room::kEvictUnified:
      return EvictUnifiedAsync(*room.victim, std::move(retry))
                 ? Next::kSuspended
                 : Next::kContinue;
    case Room::kWriteBack:
      WriteBackAsync(*room.victim, tier, std::move(retry));
      WriteBackMore(tier, bytes, job->protect);
      return Next::kSuspended;
    case Room::kWait:
      return Park(job);
    case Room::kFailed:
      job->no_room = room.tier_full;
      break;
  }
  return FailPrefetch(*job, room.status);
}

StoreCore::Next StoreCore::StartLoad(const JobPtr& job) {
  TensorRecord& rec = *tensors_.at(job->id);
  std::optional<Tier> src = PickSource(rec, job->filling);
  if (src.has_value() && StageOnHost(rec, job->filling, *src)) {
    // The host copy first; Loaded() then fills the device copy from it.
    rec.copy(Tier::kHost).MoveTo(CopyState::kLoading);
    job->filling = Tier::kHost;
    job->stage = Stage::kReserve;
    return Next::kContinue;
  }
  if (src.has_value()) {
    TransferAsync(rec, *src, job->filling,
                  [this, job](const absl::Status& s)
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        Resume(job, s, Stage::kLoaded);
                      });
    return Next::kSuspended;
  }
  for (const TierCopy& c : rec.copies) {
    // A write-back is moving the only copy; read it after.
    if (c.state() == CopyState::kEvicting) return Park(job);
  }
  return FailPrefetch(
      *job, absl::InternalError(absl::StrFormat(
                "tensor '%s' has contents but no valid copy (store bug)",
                rec.spec.name)));
}

StoreCore::Next StoreCore::Loaded(PrefetchJob& job) {
  if (job.filling == job.tier) return EndPrefetch(job, absl::OkStatus());
  // The host copy is there (staged, or unified memory's pages).
  TensorRecord& rec = *tensors_.at(job.id);
  TierCopy& host = rec.copy(Tier::kHost);
  host.last_use = ++tick_;
  host.MoveTo(CopyState::kValid);
  Changed();
  if (!unified()) {  // staged: now the device copy, from the host copy
    job.filling = job.tier;
    job.stage = Stage::kReserve;
    return Next::kContinue;
  }
  // Unified memory: now the device residency.
  ++host.transfer_pins;
  job.filling = Tier::kDevice;
  job.stage = Stage::kReserveResidency;
  return Next::kContinue;
}

StoreCore::Next StoreCore::StartMigration(const JobPtr& job) {
  TensorRecord* rec = tensors_.at(job->id).get();
  const ManagedRange range = RangeOf(*rec);
  mover_->RunAsync(
      [this, range, label = rec->spec.name] {
        return MoveUnifiedPages(range, /*discard=*/false, label);
      },
      [this, job, rec](absl::Status moved) {
        ContinueHere(
            [this, job, rec, &moved]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
              const absl::Status filled =
                  EndUnifiedFill(*rec, Fill::kLoad, /*demand=*/false, moved);
              Resume(job, filled, Stage::kMigrated);
            });
      });
  return Next::kSuspended;
}

StoreCore::Next StoreCore::FailPrefetch(PrefetchJob& job,
                                        const absl::Status& status) {
  TensorRecord& rec = *tensors_.at(job.id);
  switch (job.stage) {
    case Stage::kReserveResidency:
      --rec.copy(Tier::kHost).transfer_pins;
      AbandonCopy(rec, Tier::kDevice);
      break;
    case Stage::kMigrate:  // EndUnifiedFill unpinned the host copy
      AbandonCopy(rec, Tier::kDevice);
      break;
    default:  // reserving or loading `filling`
      AbandonCopy(rec, job.filling);
      // Unified memory: the device copy waited for the host copy.
      if (job.filling != job.tier) AbandonCopy(rec, job.tier);
      break;
  }
  return EndPrefetch(job, status);
}

StoreCore::Next StoreCore::EndPrefetch(PrefetchJob& job,
                                       const absl::Status& status) {
  TierCopy& copy = tensors_.at(job.id)->copy(job.tier);
  if (status.ok()) copy.last_use = ++tick_;
  --prefetches_running_;
  Changed();  // PausePrefetch may be waiting for this one
  if (!status.ok()) {
    if (!job.no_room) ++prefetch_.failed;
    copy.prefetch_pending = false;
    return Next::kFinished;
  }
  copy.MoveTo(CopyState::kValid);
  copy.prefetched = copy.prefetch_pending;  // unless an acquire counted it late
  copy.prefetch_pending = false;
  Changed();
  return Next::kFinished;
}

StoreCore::Next StoreCore::Park(const JobPtr& job) {
  parked_.push_back(job);
  return Next::kSuspended;
}

void StoreCore::Resume(const JobPtr& job, const absl::Status& status,
                       Stage next) {
  if (status.ok()) {
    job->stage = next;
  } else {
    job->failure = status;  // undone at the stage that started the transfer
  }
  StepPrefetch(job);
}

void StoreCore::TransferAsync(TensorRecord& rec, Tier src, Tier dst,
                              Then then) {
  TensorRecord* r = &rec;  // alive: its copies are busy until the end
  mover_->MoveAsync(
      BeginTransfer(rec, src, dst),
      [this, r, src, dst, then = std::move(then)](absl::Status status,
                                                  const MoveRequest& done) {
        ContinueHere([this, r, src, dst, &then, &status,
                      &done]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          then(EndTransfer(*r, src, dst, status, done.checksum));
        });
      });
}

void StoreCore::WriteBackAsync(TensorRecord& rec, Tier tier, Then then,
                               bool to_home) {
  const Tier target = BeginWriteBack(rec, tier, to_home);
  TensorRecord* r = &rec;
  TransferAsync(
      rec, tier, target,
      [this, r, tier, target, then = std::move(then)](const absl::Status& moved)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            then(EndWriteBack(*r, tier, target, moved));
          });
}

bool StoreCore::EvictUnifiedAsync(TensorRecord& rec, Then then) {
  std::optional<UnifiedEviction> eviction =
      BeginEvictUnified(rec, /*contents_dead=*/false);
  if (!eviction.has_value()) {
    DropCopy(rec, Tier::kDevice, /*eviction=*/true);
    return false;
  }
  TensorRecord* r = &rec;
  auto e = std::make_shared<UnifiedEviction>(std::move(*eviction));
  mover_->RunAsync(
      [this, e] { return RunUnifiedEviction(*e); },
      [this, r, e, then = std::move(then)](absl::Status moved) {
        ContinueHere(
            [this, r, e, &then, &moved]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
              EndEvictUnified(*r, *e, moved);
              then(absl::OkStatus());  // a failed hint loses nothing
            });
      });
  return true;
}

void StoreCore::QueuePrefetch(TensorRecord& rec, Tier tier) {
  TierCopy& copy = rec.copy(tier);
  if (copy.state() != CopyState::kAbsent || copy.prefetch_pending) return;
  // Unified memory without hints: pages reach the device by faults only.
  if (unified() && !hints() && tier == Tier::kDevice) return;
  ++prefetch_.issued;
  copy.prefetch_pending = true;
  prefetch_queue_.push_back(std::make_shared<PrefetchJob>(
      PrefetchJob{.id = rec.id, .tier = tier, .bytes = rec.spec.size_bytes}));
  OnExecutor([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { PumpPrefetches(); });
}

absl::Status StoreCore::Prefetch(TensorId id, Tier tier) {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
  STRATA_RETURN_IF_ERROR(CheckLeaseTier(*rec, tier));
  TierCopy& copy = rec->copy(tier);
  if (copy.state() == CopyState::kValid) {
    ++prefetch_.issued;
    copy.prefetched = true;  // already there: the next acquire is a hit
    return absl::OkStatus();
  }
  QueuePrefetch(*rec, tier);  // counted once per copy, however often asked
  return absl::OkStatus();
}

void StoreCore::CountLatePrefetch(TierCopy& copy) {
  if (!copy.prefetch_pending) return;
  ++prefetch_.late;  // asked for, but not there when the acquire came
  copy.prefetch_pending = false;
}

}  // namespace strata
