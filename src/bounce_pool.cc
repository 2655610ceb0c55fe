#include "src/bounce_pool.h"

#include <algorithm>

#include "strata/status.h"

namespace strata {

absl::StatusOr<std::unique_ptr<BouncePool>> BouncePool::Create(
    uint64_t chunk_bytes, int pairs, bool lock_memory, DeviceBackend* device) {
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<HostArena> arena,
      HostArena::Create(2 * pairs * chunk_bytes, lock_memory, device));
  return std::unique_ptr<BouncePool>(
      new BouncePool(std::move(arena), chunk_bytes, pairs));
}

BouncePool::BouncePool(std::unique_ptr<HostArena> arena, uint64_t chunk_bytes,
                       int pairs)
    : arena_(std::move(arena)), chunk_bytes_(chunk_bytes), free_(pairs, true) {}

std::unique_ptr<BouncePool::Pair> BouncePool::Acquire() {
  MutexLock lock(&mu_);
  auto any_free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::find(free_.begin(), free_.end(), true) != free_.end();
  };
  mu_.Await(Condition(&any_free));
  const int index = static_cast<int>(
      std::find(free_.begin(), free_.end(), true) - free_.begin());
  free_[index] = false;
  return std::make_unique<Pair>(this, index);
}

void BouncePool::Return(int index) {
  MutexLock lock(&mu_);
  free_[index] = true;
}

}  // namespace strata
