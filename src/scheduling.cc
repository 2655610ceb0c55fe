// scheduling.cc: how StoreCore uses the access predictor — step boundaries,
// observing every acquire, prefetching the predicted accesses ahead within a
// byte lookahead per tier, and next-use distances for Belady eviction.
//
// Prefetch order is trace order: the walk over Upcoming() stops adding loads
// for a tier once the copies of the predicted accesses (those already there
// included) would pass its lookahead — by default all of the tier not under a
// lease — so nearer accesses are always served first and the window never
// asks for more than fits. Belady eviction with protection (a prefetch never
// evicts a copy needed before its own) keeps a wide window from thrashing.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "src/store_core.h"

namespace strata {
namespace {

// How many predicted accesses one acquire looks through.
constexpr size_t kLookaheadEvents = 256;

}  // namespace

void StoreCore::BeginStep() {
  MutexLock lock(&mu_);
  predictor_.BeginStep();
  in_step_ = true;
}

void StoreCore::EndStep() {
  MutexLock lock(&mu_);
  predictor_.EndStep();
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

void StoreCore::ObserveAndPrefetch(TensorId id, Tier tier, Access access) {
  predictor_.Observe({id, tier, access});
  if (!options_.scheduler.prefetch || prefetch_paused_ ||
      !predictor_.has_prediction()) {
    return;
  }
  uint64_t window[kNumTiers] = {0, 0, 0};
  bool full[kNumTiers] = {false, false, false};
  const uint64_t limit[kNumTiers] = {LookaheadBytes(Tier::kDevice),
                                     LookaheadBytes(Tier::kHost), 0};
  // Tensors a predicted access writes before the one being considered, and
  // on which tier: a copy prefetched to another tier now would be stale by
  // its use (e.g. next step's weights, before the optimizer updates them).
  absl::flat_hash_map<TensorId, Tier> written;
  for (const AccessEvent& next : predictor_.Upcoming(kLookaheadEvents)) {
    const int t = static_cast<int>(next.tier);
    const auto earlier_write = written.find(next.id);
    const bool stale_by_use =
        earlier_write != written.end() && earlier_write->second != next.tier;
    if (next.access != Access::kRead) written[next.id] = next.tier;
    if (next.tier == Tier::kNvme || full[t]) continue;
    auto it = tensors_.find(next.id);
    if (it == tensors_.end()) continue;
    TensorRecord& rec = *it->second;
    const uint64_t bytes = alloc(next.tier).RoundUp(rec.spec.size_bytes);
    if (window[t] + bytes > limit[t]) {
      full[t] = true;  // nearer accesses first: nothing later on this tier
      continue;
    }
    window[t] += bytes;
    // An overwrite needs no contents; a copy below the home tier cannot exist.
    if (next.access == Access::kOverwrite || !rec.has_contents ||
        stale_by_use ||
        static_cast<int>(next.tier) > static_cast<int>(rec.spec.home)) {
      continue;
    }
    QueuePrefetch(rec, next.tier);
  }
}

void StoreCore::PausePrefetch(bool paused) {
  MutexLock lock(&mu_);
  prefetch_paused_ = paused;
  // Pausing returns once no prefetch is moving bytes, so that the caller's
  // next allocations see the tier as it will stay.
  while (paused && prefetches_running_ > 0) changed_.Wait(&mu_);
}

void StoreCore::QueuePrefetch(TensorRecord& rec, Tier tier) {
  TierCopy& copy = rec.copy(tier);
  if (copy.state != CopyState::kAbsent || copy.prefetch_pending) return;
  // Unified memory without hints: pages reach the device by faults only.
  if (unified() && !hints() && tier == Tier::kDevice) return;
  ++prefetch_.issued;
  copy.prefetch_pending = true;
  const TensorId id = rec.id;
  boost::asio::post(*prefetch_pool_,
                    [this, id, tier] { RunPrefetch(id, tier); });
}

}  // namespace strata
