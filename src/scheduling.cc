// scheduling.cc: how StoreCore uses the access predictor — step boundaries,
// observing every acquire, prefetching the predicted accesses ahead within a
// byte lookahead per tier, and next-use distances for Belady eviction.
//
// The policies are the scheduler's pure functions: PlanPrefetch
// (scheduler/prefetch_planner.h) picks the loads within each tier's
// lookahead — by default all of the tier not under a lease — and PickVictim
// (scheduler/eviction.h) the copy to evict; this file builds their views of
// the store's records. Belady eviction with protection (a prefetch never
// evicts a copy needed before its own, nor one that eviction on demand would
// keep: OnDemandWouldKeep) keeps a wide window from thrashing, and each
// prefetch starts as late as its link allows (PlanPrefetch's timing rule,
// from the trace's times and each link's throughput so far). On a
// fragmented tier room is made by evicting one contiguous range
// (PickRoomVictim).
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <vector>

#include "scheduler/eviction.h"
#include "scheduler/eviction_range.h"
#include "scheduler/prefetch_planner.h"
#include "src/store_core.h"

namespace strata {
namespace {

// How many predicted accesses one acquire looks through.
constexpr size_t kLookaheadEvents = 256;

// A load is planned as if it took this many times its bytes over the link's
// throughput so far: NVMe reads share the disk with about as many bytes of
// write-backs (a full tier makes room for a load by writing a copy back), and
// a step's pace varies.
constexpr double kTransferMargin = 2;

// The link a load of rec's copy on `tier` would use: from the nearest valid
// copy (PickSource's order), NVMe when there is none yet.
Link LoadLink(const TensorRecord& rec, Tier tier) {
  const Tier nearer = tier == Tier::kDevice ? Tier::kHost : Tier::kDevice;
  if (rec.copy(nearer).state() == CopyState::kValid) {
    return tier == Tier::kDevice ? Link::kH2D : Link::kD2H;
  }
  return Link::kNvmeRead;
}

}  // namespace

void StoreCore::BeginStep() {
  MutexLock lock(&mu_);
  predictor_.BeginStep();
  PlanStep();
  in_step_ = true;
}

void StoreCore::EndStep() {
  MutexLock lock(&mu_);
  predictor_.EndStep();
  PlanStep();
  in_step_ = false;
  if (!unified()) return;
  for (auto& [id, rec] : tensors_) {  // for read-mostly advice
    rec->written_last_step = rec->writes_this_step > 0;
    rec->writes_this_step = 0;
  }
}

uint64_t StoreCore::NextUseDistance(const TensorRecord& rec) const {
  return predictor_.NextUse(rec.id).value_or(
      std::numeric_limits<uint64_t>::max());
}

uint64_t StoreCore::LookaheadBytes(Tier tier) const {
  if (options_.scheduler.lookahead_bytes > 0) {
    return options_.scheduler.lookahead_bytes;
  }
  const int t = static_cast<int>(tier);
  return capacity_[t] - std::min(capacity_[t], leased_bytes_[t]);
}

double StoreCore::ComputeSeconds() const {
  return absl::ToDoubleSeconds(absl::Now() - opened_at_) - stall_seconds_;
}

PredictedUse StoreCore::ObserveAndPrefetch(TensorId id, Tier tier,
                                           Access access) {
  const PredictedUse use =
      predictor_.Observe({id, tier, access}, ComputeSeconds());
  if (!options_.scheduler.prefetch || prefetch_paused_ ||
      !predictor_.has_prediction()) {
    return use;
  }
  if (ExecutePlan(id, use)) return use;
  const uint64_t limit[kNumTiers] = {LookaheadBytes(Tier::kDevice),
                                     LookaheadBytes(Tier::kHost), 0};
  const std::array<double, kNumLinks> gbps = mover_->Gbps();
  const std::vector<PrefetchRequest> plan = PlanPrefetch(
      predictor_.Upcoming(kLookaheadEvents), limit,
      [this, &gbps](TensorId id, Tier tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return PrefetchFactsOf(id, tier, gbps);  // called here, with mu_ held
      },
      predictor_.UpcomingSeconds(kLookaheadEvents));
  for (const PrefetchRequest& load : plan) {
    QueuePrefetch(*tensors_.at(load.id), load.tier);
  }
  return use;
}

std::optional<PrefetchFacts> StoreCore::PrefetchFactsOf(
    TensorId id, Tier tier, const std::array<double, kNumLinks>& gbps) const {
  auto it = tensors_.find(id);
  if (it == tensors_.end()) return std::nullopt;
  const TensorRecord& rec = *it->second;
  const TierCopy& copy = rec.copy(tier);
  const Link link = LoadLink(rec, tier);
  const double rate = gbps[static_cast<int>(link)] * 1e9;
  return PrefetchFacts{
      .bytes = alloc_[static_cast<int>(tier)]->RoundUp(rec.spec.size_bytes),
      .home = rec.spec.home,
      .has_contents = rec.has_contents,
      .loadable = copy.state() == CopyState::kAbsent && !copy.prefetch_pending,
      .in_flight = copy.state() == CopyState::kLoading || copy.prefetch_pending,
      .link = static_cast<int>(link),
      // No throughput seen yet: unknown, so the load is urgent.
      .transfer_seconds =
          rate > 0 ? kTransferMargin *
                         static_cast<double>(rec.spec.size_bytes) / rate
                   : std::numeric_limits<double>::infinity()};
}

CopyView StoreCore::ViewOf(const TensorRecord& rec, Tier tier,
                           bool with_next_use) const {
  const TierCopy& c = rec.copy(tier);
  auto peer = [](const TierCopy& p) {
    return PeerView{.state = p.state(),
                    .leased = p.leased(),
                    .transfer_pinned = p.transfer_pins > 0};
  };
  return CopyView{
      .id = rec.id,
      .tier = tier,
      .bytes = c.extent ? c.extent->bytes : 0,
      .offset = c.extent ? c.extent->offset : 0,
      .state = c.state(),
      .leased = c.leased(),
      .transfer_pinned = c.transfer_pins > 0,
      .awaited = c.acquires_waiting > 0,
      .dirty = rec.dirty(tier),
      .is_home = rec.is_home(tier),
      .has_contents = rec.has_contents,
      .home = peer(rec.copy(rec.spec.home)),
      .device = peer(rec.copy(Tier::kDevice)),
      .next_use = with_next_use ? EvictionDistance(rec, tier) : kNoPredictedUse,
      .last_use = c.last_use};
}

// The snapshot holds the copies present on `tier` (an absent copy is never a
// victim); next-use distances are looked up only when the query uses them.
EvictionQuery StoreCore::SnapshotVictims(Tier tier,
                                         uint64_t protect_within) const {
  EvictionQuery query{.tier = tier,
                      .policy = options_.scheduler.eviction,
                      .protect_within = protect_within,
                      .unified = unified()};
  const bool with_next_use =
      query.policy == EvictionPolicy::kBelady || protect_within > 0;
  victim_views_.clear();
  uint64_t small_bytes = 0;
  for (const auto& [id, rec] : tensors_) {
    if (rec->copy(tier).state() == CopyState::kAbsent) continue;
    victim_views_.push_back(ViewOf(*rec, tier, with_next_use));
    if (victim_views_.back().bytes < kSmallCopyBytes) {
      small_bytes += victim_views_.back().bytes;
    }
  }
  // Small host copies of NVMe-homed tensors stay in host memory while they
  // take at most an eighth of it: a few hundred biases, LayerNorm weights
  // and their moments then cost no NVMe requests at all, and a model made
  // of small tensors still evicts as usual.
  if (tier == Tier::kHost && tiers_.nvme != nullptr && !unified() &&
      small_bytes <= capacity_[static_cast<int>(Tier::kHost)] / 8) {
    query.keep_small_below = kSmallCopyBytes;
  }
  return query;
}

TensorRecord* StoreCore::PickVictim(Tier tier, uint64_t protect_within) const {
  const EvictionQuery query = SnapshotVictims(tier, protect_within);
  const std::optional<size_t> victim =
      ::strata::PickVictim(victim_views_, query);
  if (!victim.has_value()) return nullptr;
  if (protect_within > 0 && OnDemandWouldKeep(victim_views_[*victim], query)) {
    return nullptr;
  }
  return tensors_.at(victim_views_[*victim].id).get();
}

// An eviction made for a copy needed `protect_within` accesses from now
// takes the victim that eviction on demand would take then, or none: a copy
// used before then whose next use after that comes later than the victim's
// would be the better victim by then (Belady at the time of the access), so
// evicting this one now adds a read that on demand would not make. So would
// a copy leased now whose lease is predicted to end before then (the
// moments an optimizer step holds while the next layer's are prefetched). A
// copy predicted to be still leased at that access does not count (on
// demand could not evict it). The caller waits (a prefetch is dropped and
// planned again later).
bool StoreCore::OnDemandWouldKeep(const CopyView& victim,
                                  const EvictionQuery& query) const {
  // A copy with no predicted use is never needed sooner than any other.
  const uint64_t protect = query.protect_within;
  if (protect == kNoPredictedUse) return false;
  EvictionQuery later = query;
  later.protect_within = 0;
  for (const CopyView& z : victim_views_) {
    CopyView then = z;  // z as eviction on demand would see it
    if (z.leased) {
      if (predictor_.LeaseHeldAt(z.id, protect)) continue;
      then.leased = false;
    } else if (z.next_use >= protect) {
      continue;  // evictable now: PickVictim weighed it already
    }
    if (!IsEvictable(then, later)) continue;
    // Leased again then (used with the protected copy, as an optimizer step
    // holds a weight and its moments): eviction on demand could not take it.
    if (z.next_use < protect && predictor_.HeldAt(z.id, protect)) continue;
    then.next_use = predictor_.NextUse(z.id, protect).value_or(kNoPredictedUse);
    // In the policy's own order: a small copy kept on the tier
    // (keep_small_below) is not the better victim for being used later.
    if (BetterVictim(then, victim, later)) return true;
  }
  return false;
}

TensorRecord* StoreCore::PickRoomVictim(Tier tier, const ExtentAllocator& arena,
                                        uint64_t bytes,
                                        uint64_t protect_within) const {
  TensorRecord* victim = PickVictim(tier, protect_within);
  const uint64_t want = arena.RoundUp(bytes);
  if (victim == nullptr || unified() ||
      arena.FreeBytesAround(*victim->copy(tier).extent) >= want) {
    return victim;  // the next-use victim alone makes room
  }
  // victim_views_ is PickVictim's snapshot. Copies being written back are
  // left out: their space is free in a trial arena, a wall otherwise.
  const EvictionQuery query = SnapshotVictims(tier, protect_within);
  std::erase_if(victim_views_, [](const CopyView& v) {
    return v.state == CopyState::kEvicting;
  });
  std::vector<FreeRange> free;
  free.reserve(arena.free_ranges().size());
  for (const auto& [offset, size] : arena.free_ranges()) {
    free.push_back({offset, size});
  }
  const std::optional<std::vector<size_t>> range =
      PickVictimRange(victim_views_, free, want, query);
  if (!range.has_value() || range->empty()) return victim;
  // Clean copies first: dropping them costs nothing.
  size_t pick = range->front();
  for (size_t i : *range) {
    if (!victim_views_[i].dirty) {
      pick = i;
      break;
    }
  }
  return tensors_.at(victim_views_[pick].id).get();
}

void StoreCore::PausePrefetch(bool paused) {
  MutexLock lock(&mu_);
  prefetch_paused_ = paused;
  // Pausing returns once no prefetch is moving bytes, so that the caller's
  // next allocations see the tier as it will stay.
  while (paused && prefetches_running_ > 0) changed_.Wait(&mu_);
}

}  // namespace strata
