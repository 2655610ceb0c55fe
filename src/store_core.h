// store_core.h: StoreCore, the state machine behind Store.
//
// One Mutex guards every tensor record and the three tier allocators;
// transfers run with it released, their copies marked loading/evicting and
// their sources pinned so no other thread frees or overwrites them. Threads
// that must wait for a transfer (an acquire of a loading copy, an allocation
// waiting for an eviction in flight) wait on one CondVar signalled at every
// state change. Eviction (Belady over the predictor's trace, or LRU) picks
// among unleased, unpinned, non-home copies; clean copies are dropped, dirty
// ones written back to the next slower tier with space (always possible: the
// home extent is reserved). Every acquire is shown to the predictor, whose
// upcoming accesses are prefetched by jobs on an executor (scheduling.cc,
// prefetch.cc): their transfers run on the Mover's transfer threads and their
// completions continue the work, so no executor thread waits.
//
// Thread safety: thread-safe. Owned by a shared_ptr so that leases (weak_ptr)
// can outlive the Store handle safely.
#ifndef STRATA_SRC_STORE_CORE_H_
#define STRATA_SRC_STORE_CORE_H_

#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "scheduler/eviction.h"
#include "scheduler/nvme_floor.h"
#include "scheduler/predictor.h"
#include "scheduler/prefetch_planner.h"
#include "scheduler/snapshot.h"
#include "src/bounce_pool.h"
#include "src/event_reaper.h"
#include "src/extent_allocator.h"
#include "src/lease_releaser.h"
#include "src/mover.h"
#include "src/step_plans.h"
#include "src/store_parts.h"
#include "src/tensor_record.h"
#include "src/timeline.h"
#include "strata/options.h"
#include "strata/store.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {

class StoreCore : public internal::LeaseReleaser,
                  public std::enable_shared_from_this<StoreCore> {
 public:
  // The automatic mode's cap on prefetch jobs in flight (small tensors).
  static constexpr int kAutoPrefetchJobs = 16;
  // Transfer threads beyond the prefetch jobs': write-backs started together
  // to make room (WriteBackMore) run on them.
  static constexpr int kWriteBackThreads = 8;
  // Host copies below this size are evicted to NVMe last (PickVictim): where
  // a request's latency, not bandwidth, sets its cost.
  static constexpr uint64_t kSmallCopyBytes = 64 * 1024;

  StoreCore(const StoreOptions& options, TierSet tiers);
  ~StoreCore() override;
  // Waits for the prefetches in flight and stops the executor; later calls
  // fail with FailedPrecondition.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<TensorId> Create(const TensorSpec& spec)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Destroy(TensorId id) ABSL_LOCKS_EXCLUDED(mu_);
  // Store::Acquire: AcquireLease reporting a failed stream-ordered load
  // whose leases had all ended (TakeQueuedLoadError).
  absl::StatusOr<Lease> Acquire(TensorId id, Tier tier, Access access,
                                void* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // `report_failed_load` false: the store's own reads, which leave that
  // report to the next Acquire.
  absl::StatusOr<Lease> AcquireLease(TensorId id, Tier tier, Access access,
                                     void* stream, bool report_failed_load)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Prefetch(TensorId id, Tier tier) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Evict(TensorId id, Tier to_tier) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Discard(TensorId id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Write(TensorId id, const void* src, uint64_t bytes,
                     uint64_t offset) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Read(TensorId id, void* dst, uint64_t bytes, uint64_t offset)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<TensorSpec> GetSpec(TensorId id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Residency> GetResidency(TensorId id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void BeginStep() ABSL_LOCKS_EXCLUDED(mu_);
  void EndStep() ABSL_LOCKS_EXCLUDED(mu_);
  void PausePrefetch(bool paused) ABSL_LOCKS_EXCLUDED(mu_);
  Stats GetStats() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status WriteTimeline(const std::string& path) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string DescribeTiers() const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status ReleaseLease(TensorId id, uint64_t token, void* stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CopyLeased(TensorId id, uint64_t token, void* leased, void* user,
                          uint64_t bytes, bool into_lease,
                          void* stream) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // --- store_core.cc: the public operations' checks; acquire.cc: the
  // acquire paths and lease grants; store_io.cc: Write and Read's copies.
  absl::StatusOr<TensorRecord*> Find(TensorId id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until nothing of rec is busy and no exclusive acquire is pending,
  // then returns rec again (it may have been destroyed meanwhile).
  absl::StatusOr<TensorRecord*> FindIdle(TensorId id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckLeaseTier(const TensorRecord& rec, Tier tier) const;
  absl::Status CheckConflict(const TensorRecord& rec, Tier tier,
                             Access access) const;
  // `use` is where the predictor put the acquire (its release is recorded
  // there: Predictor::ObserveRelease).
  absl::StatusOr<Lease> Grant(TensorRecord& rec, Tier tier, Access access,
                              void* stream, const PredictedUse& use)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The two acquire paths; `*stalled` is set when the call had to wait for
  // or make a transfer (its time then counts as stall time).
  absl::StatusOr<Lease> AcquireShared(TensorId id, Tier tier, void* stream,
                                      bool* stalled, const PredictedUse& use)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the next Changed() on behalf of an acquire of `id` on `tier`
  // that found its copy busy (a prefetch's load in flight, say). While it
  // waits the copy is awaited: eviction leaves it, so the load it waits for
  // is not dropped before the acquire can take it (the predictor counted the
  // access when the acquire began, so the copy's next use looks a step away).
  void WaitForCopy(TensorId id, Tier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Caller bytes Write() copies into a copy before its lease is granted.
  struct UserBytes {
    const void* src;
    uint64_t bytes;
    uint64_t offset;
  };
  absl::StatusOr<Lease> AcquireExclusive(TensorId id, Tier tier, Access access,
                                         void* stream, bool* stalled,
                                         const UserBytes* user = nullptr,
                                         const PredictedUse& use = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds the exclusive copy on `tier` (already marked loading), copies
  // `user` bytes into it if given, and waits for other copies' transfers.
  // The copy stays loading; on error the previous contents are intact.
  // `only_copy`: the copy was valid with no valid copy on a slower tier.
  absl::Status PrepareExclusive(TensorRecord& rec, Tier tier, Access access,
                                bool was_valid, bool only_copy,
                                const UserBytes* user)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes rec's copy on `tier` (marked kLoading) to its home tier, keeping
  // it; on error the copy is valid again.
  absl::Status SaveToHome(TensorRecord& rec, Tier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Write() into a device-homed tensor's only copy: copies the user bytes
  // (and the rest of the old contents) into a fresh extent and swaps it in,
  // so a failed copy leaves the old one intact. nullopt when the device has
  // no room for the fresh extent (the caller then writes in place).
  std::optional<absl::Status> WriteBeside(TensorRecord& rec,
                                          const UserBytes& user)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Undoes a failed Write() into rec's copy on `tier`: the other copies keep
  // the previous contents; with none (device home), DataLoss.
  absl::Status FailedUserCopy(TensorRecord& rec, Tier tier,
                              const absl::Status& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CopyUserBytes(TensorRecord& rec, Tier tier,
                             const UserBytes& user)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountAcquire(TensorId id, Tier tier, absl::Time start, bool stalled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CopyThroughLease(TensorId id, void* user, uint64_t bytes,
                                uint64_t offset, bool to_tensor);

  // --- residency.cc: moving copies between tiers. Each may release mu_
  // while a transfer runs; callers re-check what they rely on afterwards.
  // Fills rec's copy on `tier`, which the caller marked kLoading: reserves
  // space (evicting as needed) then loads the contents from the nearest valid
  // copy (kLoad), zeros them (kZero) or leaves them undefined (kNone). The
  // copy stays kLoading; on error it is absent again and its space freed.
  enum class Fill { kLoad, kZero, kNone };
  // `protect_within`: copies whose predicted next use is closer than this
  // many accesses are not evicted for it (a prefetch must not push out what
  // is needed before the tensor it fetches); 0 protects nothing.
  // `demand`: an acquire waits for it (not a prefetch).
  // `stream_ordered`: a device copy loaded from the host copy is only queued
  // on the copy stream (LoadQueued); the caller's lease waits for it on its
  // stream, not on the CPU.
  absl::Status FillCopy(TensorRecord& rec, Tier tier, Fill fill,
                        uint64_t protect_within = 0, bool demand = true,
                        bool stream_ordered = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadFromNearest(TensorRecord& rec, Tier tier,
                               bool stream_ordered = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stream-ordered device acquire (DESIGN; issue 14 item 6): queues rec's
  // host copy -> its device copy (reserved) and returns without waiting. The
  // copy's event becomes the device copy's release_event, so leases' streams
  // wait for it (Grant), copies out of it start after it, and freeing it
  // waits for it (AwaitDeviceReaders); the host copy stays pinned (a
  // transfer reads it) until the event has happened, when the reaper runs
  // EndQueuedLoad. An error queuing it: nothing queued, the host copy as it
  // was.
  absl::Status LoadQueued(TensorRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A queued load's event has happened (`status`: its Synchronize): unpins
  // the host copy. A failed copy still leased keeps its error (load_error):
  // it serves no new lease, each of its leases' releases returns the error
  // and the last one drops it. One no longer leased is dropped and the
  // error goes to the tensor's next Acquire (TakeQueuedLoadError). The host
  // copy is intact either way.
  void EndQueuedLoad(TensorId id, const QueuedCopy& copy,
                     const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of rec's failed queued load whose leases had all ended, once
  // (then cleared; Discard clears it too).
  absl::Status TakeQueuedLoadError(TensorRecord& rec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Undoes a kLoading copy: frees a cache extent, marks it absent.
  void AbandonCopy(TensorRecord& rec, Tier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finds a valid, not-evicting copy to read rec's contents from, nearest to
  // `tier` first.
  std::optional<Tier> PickSource(const TensorRecord& rec, Tier tier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a load of rec's copy on `tier` from `src` should first fill a
  // host copy: a small tensor's device load from NVMe, so that its next
  // load comes from host memory (where small copies stay: PickVictim)
  // instead of paying an NVMe request's latency again.
  bool StageOnHost(const TensorRecord& rec, Tier tier, Tier src) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves `bytes` on `tier`, evicting copies (PickVictim) as needed;
  // the time it spent making room counts in room_seconds_.
  absl::StatusOr<Extent> AllocateOn(Tier tier, uint64_t bytes,
                                    const TensorSpec& for_spec,
                                    uint64_t protect_within = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // AllocateOn's loop; *made_room: it evicted, wrote back or waited.
  absl::StatusOr<Extent> AllocateMakingRoom(Tier tier, uint64_t bytes,
                                            const TensorSpec& for_spec,
                                            uint64_t protect_within,
                                            bool* made_room)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One attempt of AllocateOn that never waits (store_parts.h).
  using Room = MakeRoomResult;
  // `explain`: a full tier's kFailed status names what holds the tier
  // (TierFull); a prefetch, which only skips, passes false and gets a short
  // one (building that message cost ~1 % of a GPT step's CPU).
  Room MakeRoom(Tier tier, uint64_t bytes, const TensorSpec& for_spec,
                uint64_t protect_within, bool explain = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- store_compaction.cc: moves idle copies within `tier` (under mu_)
  // when its free bytes hold `bytes` but not in one range; true if one does.
  bool Compact(Tier tier, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- prefetch.cc: a prefetch is a job on the executor, whose handlers
  // never wait. A job's steps run with mu_ held: a step that starts a
  // transfer (the load, or the write-back or migration that makes room)
  // returns, and the transfer's completion, posted back to the executor,
  // takes the next step; a step that must wait for a transfer another thread
  // runs parks the job until the next Changed(). At most
  // options_.scheduler.prefetch_threads jobs run at once, started in the
  // order they were queued; each has at most one transfer in flight.
  using PrefetchJob = ::strata::PrefetchJob;  // store_parts.h

  // Queues a background load of rec's copy on `tier` (a PrefetchJob) unless
  // it is there or coming.
  void QueuePrefetch(TensorRecord& rec, Tier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An acquire that must wait for or make the copy a prefetch was asked to
  // bring counts that prefetch late.
  void CountLatePrefetch(TierCopy& copy) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  using JobPtr = std::shared_ptr<PrefetchJob>;
  using Stage = PrefetchJob::Stage;
  enum class Next { kContinue, kSuspended, kFinished };
  // Before a device copy's extent is freed: blocks until the kernels that
  // read or wrote it under its last lease have ended (its release event),
  // unless they already have. The freed range is reused at once by copy
  // streams that know nothing of the caller's stream (DESIGN: release
  // records an event that eviction waits for). Counted in
  // device_reader_waits_.
  void AwaitDeviceReaders(const TierCopy& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `fn` on the executor with mu_ held.
  void OnExecutor(std::function<void()> fn);
  // Runs a transfer's continuation `fn` with mu_ held on the transfer thread
  // that just finished it: posting it to the executor cost one more thread
  // handoff per transfer. A continuation never waits for another transfer;
  // it may wait, rarely, for the caller's kernels on memory it frees
  // (AwaitDeviceReaders), which need nothing of the store to end.
  void ContinueHere(const std::function<void()>& fn) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts queued jobs while fewer than prefetch_threads run.
  void PumpPrefetches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the job's steps until it suspends or finishes.
  void StepPrefetch(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next StepOnce(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next StartPrefetch(PrefetchJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next WaitForHost(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves `bytes` on `tier` into `*extent` (then the job goes to `next`),
  // or starts what must come first and suspends.
  Next Reserve(const JobPtr& job, Tier tier, uint64_t bytes,
               std::optional<Extent>* extent, Stage next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next StartLoad(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next Loaded(PrefetchJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next StartMigration(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Undoes what the job's stage holds (FillCopy's and FillUnifiedDevice's
  // error paths), then ends it.
  Next FailPrefetch(PrefetchJob& job, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The prefetch's end: the copy is valid (or, on error, absent again).
  Next EndPrefetch(PrefetchJob& job, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Next Park(const JobPtr& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Continues `job` at `next` after its transfer, or fails it.
  void Resume(const JobPtr& job, const absl::Status& status, Stage next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishJob(const PrefetchJob& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `next` may start now (SchedulerOptions::prefetch_threads; 0:
  // the automatic byte window).
  bool MayStartPrefetch(const PrefetchJob& next) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Transfer, WriteBack and EvictUnified started on a transfer thread; each
  // calls `then` on the executor with mu_ held when done. EvictUnifiedAsync
  // returns false when nothing had to move (the residency ended at once and
  // `then` is not called).
  using Then = std::function<void(const absl::Status&)>;
  void TransferAsync(TensorRecord& rec, Tier src, Tier dst, Then then)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `to_home`: write to the home tier, never to the host on the way.
  void WriteBackAsync(TensorRecord& rec, Tier tier, Then then,
                      bool to_home = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool EvictUnifiedAsync(TensorRecord& rec, Then then)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- unified.cc: unified-memory mode, where a device copy is the host
  // copy's managed pages resident on the GPU.
  bool unified() const {
    return options_.device.memory == DeviceMemory::kUnified;
  }
  bool hints() const { return unified() && options_.device.unified_hints; }
  // Where a lease on `tier` points: in unified mode the host extent on both.
  std::byte* DataPointer(const TensorRecord& rec, Tier tier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FillCopy for the device tier in unified mode: makes the host copy valid
  // (loading or zeroing it as `fill` says), reserves device residency, then
  // migrates the pages (a prefetch hint, discarding when `fill` is kNone) or,
  // without hints, charges a fault.
  absl::Status FillUnifiedDevice(TensorRecord& rec, Fill fill,
                                 uint64_t protect_within, bool demand)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends rec's device residency (valid, unleased, idle): live contents come
  // back over the link (a prefetch to host with hints, charged page faults
  // without; nothing for read-mostly ones, whose host duplicate is valid),
  // dead ones are discarded. A failed hint still ends the residency:
  // managed memory stays coherent, so nothing is lost.
  // `contents_dead`: an overwrite or Discard follows, so nothing comes back.
  void EvictUnified(TensorRecord& rec, bool contents_dead = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EvictUnified in three parts, for callers that run the middle one
  // elsewhere: Begin marks the device copy evicting and pins the host copy,
  // or returns nullopt when nothing moves (the residency just ends);
  // RunUnifiedEviction moves the pages (no lock needed); End ends the
  // residency.
  struct UnifiedEviction {
    ManagedRange range;
    bool migrate = false;                // live pages come back to the host
    bool discard = false;                // dead pages are discarded
    bool was_pending = false;            // rec.exclusive_pending before
    std::shared_ptr<DeviceEvent> after;  // the last lease's release
    std::string label;
  };
  std::optional<UnifiedEviction> BeginEvictUnified(TensorRecord& rec,
                                                   bool contents_dead)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RunUnifiedEviction(const UnifiedEviction& eviction) const;
  void EndEvictUnified(TensorRecord& rec, const UnifiedEviction& eviction,
                       const absl::Status& moved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FillUnifiedDevice's migration of `range` to the device (no lock
  // needed), and its bookkeeping after: unpins the host copy, counts, and
  // advises; on error the caller abandons the copies.
  absl::Status MoveUnifiedPages(const ManagedRange& range, bool discard,
                                std::string_view label) const;
  absl::Status EndUnifiedFill(TensorRecord& rec, Fill fill, bool demand,
                              const absl::Status& moved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a host acquire should first take rec's pages off the device.
  bool ShouldEvictForHost(const TensorRecord& rec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Read-mostly advice for a tensor the last whole step did not write; and
  // its removal before a write or when the range is freed.
  void AdviseReadMostly(TensorRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetReadMostly(TensorRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ManagedRange RangeOf(const TensorRecord& rec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- planning.cc: the residency plan's executor.
  // Plans the shape the last step ran on, when StepPlans says so.
  void PlanStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The planner's input for `shape`; false when a tensor it names is gone.
  bool BuildPlanInput(const StepShape& shape, PlanInput* input,
                      std::vector<TensorId>* ids) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issues the planned transfers due at the acquire `use`; false when no
  // plan covers the trace replayed (the reactive prefetch then runs).
  bool ExecutePlan(TensorId id, const PredictedUse& use)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Leave LeaveTier(TensorRecord& rec, PendingLeave& leave)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Leave MoveClean(TensorRecord& rec, PendingLeave& leave)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tries the blocked leaves again, but not tensor `accessed`'s (in use).
  void RetryLeaves(TensorId accessed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordPlanned(const PlannedTransfer& t, const std::string& name) const;
  void AddPlanStats(SchedulerStats* s) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a plan runs and keeps rec's copy on `tier` now (PlanKeeps), and
  // the next-use distance eviction ranks that copy by: Belady's, except
  // that a copy a running plan does not keep there now ranks furthest.
  bool PlanKeeps(const TensorRecord& rec, Tier tier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t EvictionDistance(const TensorRecord& rec, Tier tier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- scheduling.cc: the scheduler's use in the store.
  // Records the acquire and queues the prefetches PlanPrefetch returns;
  // returns where the predictor put the acquire.
  PredictedUse ObserveAndPrefetch(TensorId id, Tier tier, Access access)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the prefetch planner knows of tensor `id` on `tier`, a load's time
  // taken from `gbps` (each link's throughput so far, GB/s).
  std::optional<PrefetchFacts> PrefetchFactsOf(
      TensorId id, Tier tier, const std::array<double, kNumLinks>& gbps) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seconds on the store's clock less the time acquires stalled: the step's
  // own pace, which the trace records so that prefetches aim at it.
  double ComputeSeconds() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // rec's copy on `tier` as the eviction policy sees it; `with_next_use`:
  // look up its predicted next use (else kNoPredictedUse).
  CopyView ViewOf(const TensorRecord& rec, Tier tier, bool with_next_use) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copy on `tier` to evict next (scheduler/eviction.h over a snapshot
  // of the copies on `tier`), or null.
  TensorRecord* PickVictim(Tier tier, uint64_t protect_within = 0) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a copy used before query.protect_within would be a better victim
  // than `victim` once used (scheduling.cc).
  bool OnDemandWouldKeep(const CopyView& victim,
                         const EvictionQuery& query) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills victim_views_ with the copies on `tier` and returns the eviction
  // query for them.
  EvictionQuery SnapshotVictims(Tier tier, uint64_t protect_within) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copy to evict next to make a free range of `bytes` in `arena` (the
  // tier's allocator, or a trial of it): PickVictim's when freeing it would
  // leave such a range, else one of the contiguous range PickVictimRange
  // (scheduler/eviction_range.h) picks, clean copies first; null when
  // nothing may be evicted.
  TensorRecord* PickRoomVictim(Tier tier, const ExtentAllocator& arena,
                               uint64_t bytes, uint64_t protect_within) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t LookaheadBytes(Tier tier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SchedulerStats' NVMe floors: the most any learned shape needs.
  NvmeFloors Floors() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Predicted distance to rec's next use; no prediction = furthest.
  uint64_t NextUseDistance(const TensorRecord& rec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool TransfersInFlight(Tier tier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WriteBackInFlight(Tier tier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes rec's dirty copy on `tier` to a slower tier, then frees it.
  // After the caller began writing back one victim to make `bytes` of room
  // on `tier`, starts write-backs of the next victims in eviction order
  // (asynchronously, together), until the free space and the copies leaving
  // the tier cover `bytes`: the NVMe queue then holds many requests instead
  // of one, and a run of small victims costs one device latency, not one
  // each. A companion that fails keeps its copy (as any write-back does); the
  // next MakeRoom picks it again and reports the error.
  void WriteBackMore(Tier tier, uint64_t bytes, uint64_t protect_within)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy of `tier`'s allocator with the copies being written back (and
  // so about to leave) freed.
  ExtentAllocator TrialAfterEvictions(Tier tier) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasEvictingCopy(Tier tier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WriteBack around its transfer: Begin marks the copy evicting and the
  // target loading and returns the target; End, given the transfer's
  // status, frees the copy (or on error keeps it and abandons the target).
  Tier BeginWriteBack(TensorRecord& rec, Tier tier, bool to_home = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EndWriteBack(TensorRecord& rec, Tier tier, Tier target,
                            const absl::Status& moved)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where a write-back of rec's copy on `tier` goes: host if it has room
  // (made by dropping clean copies only), else the home tier.
  Tier WriteBackTarget(TensorRecord& rec, Tier tier)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs one transfer between two copies of rec with mu_ released.
  absl::Status Transfer(TensorRecord& rec, Tier src, Tier dst)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Transfer around its Move: Begin pins the source and describes the move;
  // End unpins it, keeps the NVMe checksum and names the tensor in an error.
  MoveRequest BeginTransfer(TensorRecord& rec, Tier src, Tier dst)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EndTransfer(TensorRecord& rec, Tier src, Tier dst,
                           const absl::Status& status, uint64_t checksum)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees a cache copy (or marks the home copy invalid, keeping its space).
  void DropCopy(TensorRecord& rec, Tier tier, bool eviction)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropOthers(TensorRecord& rec, Tier keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Signals a copy or lease state change: wakes the threads waiting on
  // changed_ and resumes the parked prefetch jobs (on the executor).
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ResourceExhausted naming what fills `tier`.
  absl::Status TooLarge(Tier tier, uint64_t bytes, const TensorSpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TierFull(Tier tier, uint64_t bytes, const TensorSpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ExtentAllocator& alloc(Tier t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return *alloc_[static_cast<int>(t)];
  }
  bool has_tier(Tier t) const { return capacity_[static_cast<int>(t)] > 0; }

  // Constant after construction.
  const StoreOptions options_;
  const TierSet tiers_;
  uint64_t capacity_[kNumTiers] = {0, 0, 0};
  std::unique_ptr<Timeline> timeline_;        // null unless options_.timeline
  const absl::Time opened_at_ = absl::Now();  // ComputeSeconds' origin
  // The executor: runs prefetch jobs' first steps and parked jobs' next ones
  // (a transfer's completion runs on its transfer thread). Declared before
  // mover_ so that it outlives the transfer threads, which post to it (a post
  // may still be returning when its handler has run).
  std::unique_ptr<boost::asio::thread_pool> executor_;
  std::unique_ptr<Mover> mover_;
  // Waits for queued loads' events (LoadQueued) and runs EndQueuedLoad.
  // Reset after Shutdown and before mover_: its completions use both.
  std::unique_ptr<EventReaper> reaper_;

  mutable Mutex mu_;
  CondVar changed_;  // signalled on every copy or lease state change
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool prefetch_paused_ ABSL_GUARDED_BY(mu_) = false;  // PausePrefetch
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;  // between BeginStep and EndStep
  int prefetches_running_ ABSL_GUARDED_BY(mu_) = 0;         // moving bytes now
  std::deque<JobPtr> prefetch_queue_ ABSL_GUARDED_BY(mu_);  // not started
  int prefetch_jobs_ ABSL_GUARDED_BY(mu_) = 0;  // started, not finished
  uint64_t prefetch_bytes_running_ ABSL_GUARDED_BY(mu_) = 0;  // their bytes
  // LoadQueued's copies whose EndQueuedLoad has not run, and all of them.
  int queued_loads_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t queued_loads_total_ ABSL_GUARDED_BY(mu_) = 0;
  // WriteBackMore's write-backs not finished yet.
  int companions_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // The automatic mode's window: one NVMe block (1 MiB without NVMe).
  uint64_t prefetch_window_bytes_ = 0;
  bool pumping_ ABSL_GUARDED_BY(mu_) = false;        // in PumpPrefetches
  std::vector<JobPtr> parked_ ABSL_GUARDED_BY(mu_);  // until Changed()
  absl::flat_hash_map<TensorId, std::unique_ptr<TensorRecord>> tensors_
      ABSL_GUARDED_BY(mu_);
  std::optional<ExtentAllocator> alloc_[kNumTiers] ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t leased_bytes_[kNumTiers] ABSL_GUARDED_BY(mu_) = {0, 0, 0};
  uint64_t evictions_[kNumTiers] ABSL_GUARDED_BY(mu_) = {0, 0, 0};
  uint64_t compactions_[kNumTiers] ABSL_GUARDED_BY(mu_) = {0, 0, 0};
  uint64_t relocated_bytes_[kNumTiers] ABSL_GUARDED_BY(mu_) = {0, 0, 0};
  uint64_t acquires_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t write_backs_ ABSL_GUARDED_BY(mu_) = 0;
  double stall_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double room_seconds_ ABSL_GUARDED_BY(mu_) = 0;  // Stats::room_seconds
  uint64_t stalled_acquires_ ABSL_GUARDED_BY(mu_) = 0;
  // Frees of a device extent that waited for its last lease's kernels.
  uint64_t device_reader_waits_ ABSL_GUARDED_BY(mu_) = 0;
  PrefetchStats prefetch_ ABSL_GUARDED_BY(mu_);
  UnifiedStats unified_ ABSL_GUARDED_BY(mu_);
  Predictor predictor_ ABSL_GUARDED_BY(mu_);
  StepPlans plans_ ABSL_GUARDED_BY(mu_);
  uint64_t plans_made_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t plan_position_ ABSL_GUARDED_BY(mu_) = 0;  // last acquire's
  // Planned leaves LeaveTier found blocked, to try again.
  std::vector<PendingLeave> pending_leaves_ ABSL_GUARDED_BY(mu_);
  double planning_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  // Floors' last answer, and the key of the shapes it was made from.
  mutable uint64_t floor_key_ ABSL_GUARDED_BY(mu_) = 0;
  mutable NvmeFloors floors_ ABSL_GUARDED_BY(mu_);
  // PickVictim's snapshot, kept to reuse its storage.
  mutable std::vector<CopyView> victim_views_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_SRC_STORE_CORE_H_
