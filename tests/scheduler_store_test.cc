// The scheduler inside the store: Belady eviction against a hand-computed
// order (and LRU as the baseline), prefetch of the predicted accesses, and
// the rule that a prefetch never evicts a copy needed before the one it
// fetches.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "strata/store.h"
#include "tests/test_util.h"

namespace strata {
namespace {

using ::strata::testing::Pattern;
using State = Residency::State;

class SchedulerStoreTest : public ::testing::Test {
 protected:
  void Open(uint64_t device_bytes, EvictionPolicy policy, bool prefetch,
            uint64_t lookahead = 0) {
    StoreOptions o = ::strata::testing::SmallStoreOptions(
        dir_.path(), device_bytes, 16 * kMiB, 64 * kMiB);
    o.scheduler.eviction = policy;
    o.scheduler.prefetch = prefetch;
    o.scheduler.lookahead_bytes = lookahead;
    o.scheduler.prefetch_threads = 1;  // prefetches run in trace order
    auto s = Store::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  // `n` tensors of 1 MiB with contents, all on NVMe only.
  std::vector<TensorId> Tensors(int n) {
    std::vector<TensorId> ids;
    for (int i = 0; i < n; ++i) {
      auto id = store_->Create(
          {.name = std::string(1, char('A' + i)), .size_bytes = kMiB});
      EXPECT_TRUE(id.ok());
      EXPECT_TRUE(store_->Write(*id, Pattern(kMiB, i).data(), kMiB).ok());
      EXPECT_TRUE(store_->Evict(*id, Tier::kNvme).ok());
      ids.push_back(*id);
    }
    return ids;
  }
  void Use(TensorId id) {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  State OnDevice(TensorId id) {
    return store_->GetResidency(id)->tiers[static_cast<int>(Tier::kDevice)];
  }
  ::strata::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

// Step A B C A D C B on a device that holds three: when D arrives in step 2,
// the next uses are C (1 ahead), B (2 ahead) and A (next step, 3 ahead), so
// Belady evicts A; LRU evicts B, the least recently used.
TEST_F(SchedulerStoreTest, BeladyEvictsTheCopyUsedFurthestAhead) {
  for (EvictionPolicy policy :
       {EvictionPolicy::kBelady, EvictionPolicy::kLru}) {
    Open(3 * kMiB, policy, /*prefetch=*/false);
    std::vector<TensorId> t = Tensors(4);
    const TensorId a = t[0], b = t[1], c = t[2], d = t[3];
    const std::vector<TensorId> step = {a, b, c, a, d, c, b};
    store_->BeginStep();
    for (TensorId id : step) Use(id);
    store_->EndStep();
    store_->BeginStep();
    for (TensorId id : {a, b, c, a}) Use(id);
    for (TensorId id : {a, b, c}) ASSERT_EQ(OnDevice(id), State::kClean);
    Use(d);
    if (policy == EvictionPolicy::kBelady) {
      EXPECT_EQ(OnDevice(a), State::kAbsent);
      EXPECT_EQ(OnDevice(b), State::kClean);
    } else {
      EXPECT_EQ(OnDevice(b), State::kAbsent);
      EXPECT_EQ(OnDevice(a), State::kClean);
    }
    EXPECT_EQ(OnDevice(c), State::kClean);
    store_->EndStep();
    const SchedulerStats s = store_->GetStats().scheduler;
    EXPECT_EQ(s.accesses, 12u);
    EXPECT_EQ(s.hits, 5u) << "step 2 replays step 1 exactly";
  }
}

// Step A B C with room for two on the device. In step 2, A is held while the
// scheduler prefetches B (needed next) and C (after B). C may not evict B,
// which is needed first, so C waits; B's acquire is a prefetch hit.
TEST_F(SchedulerStoreTest, PrefetchNeverEvictsACopyNeededSooner) {
  Open(2 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true,
       /*lookahead=*/2 * kMiB);
  std::vector<TensorId> t = Tensors(3);
  const TensorId a = t[0], b = t[1], c = t[2];
  store_->BeginStep();
  for (TensorId id : t) Use(id);
  store_->EndStep();
  ASSERT_TRUE(store_->Evict(b, Tier::kNvme).ok());
  ASSERT_TRUE(store_->Evict(c, Tier::kNvme).ok());
  store_->BeginStep();
  auto held = store_->Acquire(a, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(held.ok()) << held.status();
  for (int i = 0; i < 1000 && OnDevice(b) != State::kClean; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // C's attempt
  EXPECT_EQ(OnDevice(b), State::kClean);
  EXPECT_EQ(OnDevice(c), State::kAbsent);
  ASSERT_TRUE(held->Release().ok());
  const uint64_t hits_before = store_->GetStats().prefetch.hit;
  Use(b);
  EXPECT_EQ(store_->GetStats().prefetch.hit, hits_before + 1);
}

// A layered loop with a little compute per layer: after the first step the
// scheduler has the next layers on the device before they are acquired.
TEST_F(SchedulerStoreTest, PrefetchServesAReplayedLoop) {
  Open(4 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true);
  std::vector<TensorId> layers = Tensors(8);
  for (int step = 0; step < 4; ++step) {
    store_->BeginStep();
    for (int i = 0; i < 8; ++i) {
      Use(layers[i]);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // "compute"
    }
    for (int i = 7; i >= 0; --i) {
      Use(layers[i]);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    store_->EndStep();
  }
  const Stats s = store_->GetStats();
  EXPECT_EQ(s.scheduler.steps, 4u);
  EXPECT_EQ(s.scheduler.hits, 3u * 16) << "steps 2-4 replay step 1 exactly";
  EXPECT_GT(s.prefetch.issued, 0u);
  EXPECT_GT(s.prefetch.hit, 0u);
  EXPECT_LE(
      s.prefetch.hit + s.prefetch.late + s.prefetch.wasted + s.prefetch.failed,
      s.prefetch.issued);
}

}  // namespace
}  // namespace strata
