// The scheduler inside the store: Belady eviction against a hand-computed
// order (and LRU as the baseline), prefetch of the predicted accesses, and
// the rule that a prefetch never evicts a copy needed before the one it
// fetches. Prefetches run on the store's one prefetch thread; a
// PrefetchBarrier (tests/util/race_test_util.h) waits for the ones queued so
// far to have run, where a test needs them done, instead of sleeping.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/race_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata {
namespace {

using ::strata::testing::Pattern;
using ::strata::testing::PrefetchBarrier;
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
    // These tests pin down the reactive prefetch and eviction (the path
    // a step with no plan takes); planned_store_test.cc tests the plan's.
    o.scheduler.planned = false;
    StoreSeams seams;
    seams.wrap_block_io = [this](std::unique_ptr<BlockIo> io) {
      auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
      io_ = f.get();
      return f;
    };
    auto s = OpenStore(o, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    barrier_ = std::make_unique<PrefetchBarrier>(store_.get(), io_);
  }
  // `n` tensors of 1 MiB with contents, on NVMe only (`to` kNvme) or also in
  // host memory (kHost: their loads then never read NVMe).
  std::vector<TensorId> Tensors(int n, Tier to = Tier::kNvme) {
    std::vector<TensorId> ids;
    for (int i = 0; i < n; ++i) {
      auto id = store_->Create(
          {.name = std::string(1, char('A' + i)), .size_bytes = kMiB});
      EXPECT_TRUE(id.ok());
      EXPECT_TRUE(store_->Write(*id, Pattern(kMiB, i).data(), kMiB).ok());
      EXPECT_TRUE(store_->Evict(*id, to).ok());
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
  FaultyBlockIo* io_ = nullptr;  // owned by store_
  std::unique_ptr<Store> store_;
  std::unique_ptr<PrefetchBarrier> barrier_;
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
// which is needed first, so C gives up and waits for its acquire; B's
// acquire is a prefetch hit. The barrier returns once both prefetches have
// run (B's load, then C's attempt), so the test looks after C's attempt,
// not after a guess at how long it takes.
TEST_F(SchedulerStoreTest, PrefetchNeverEvictsACopyNeededSooner) {
  Open(2 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true,
       /*lookahead=*/2 * kMiB);
  std::vector<TensorId> t = Tensors(3, Tier::kHost);
  const TensorId a = t[0], b = t[1], c = t[2];
  store_->BeginStep();
  for (TensorId id : t) Use(id);
  store_->EndStep();
  ASSERT_TRUE(store_->Evict(b, Tier::kHost).ok());
  ASSERT_TRUE(store_->Evict(c, Tier::kHost).ok());
  const uint64_t issued_before = store_->GetStats().prefetch.issued;
  store_->BeginStep();
  auto held = store_->Acquire(a, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(store_->GetStats().prefetch.issued - issued_before, 2u)
      << "B and C are predicted next and both fit the lookahead";
  barrier_->Wait();  // B's prefetch and C's attempt have both run
  EXPECT_EQ(OnDevice(b), State::kClean);
  EXPECT_EQ(OnDevice(c), State::kAbsent);
  EXPECT_EQ(store_->GetStats().prefetch.failed, 0u)
      << "a prefetch that finds no room waits for its acquire: no failure";
  ASSERT_TRUE(held->Release().ok());
  const uint64_t hits_before = store_->GetStats().prefetch.hit;
  Use(b);
  EXPECT_EQ(store_->GetStats().prefetch.hit, hits_before + 1);
}

// An optimizer-style group: W and M are held together. Step A B W M on a
// device that holds two, B read in host memory. In step 2, A's acquire
// evicts M (used last); after B's, M is prefetched onto a full device. W is
// used before M but is still leased when M is acquired, so eviction on
// demand could not take it then: the prefetch evicts A (next used in step
// 3) and M's acquire is a hit. (Counting W as the better victim by then
// refused the prefetch.) No device lease is live when the prefetch runs.
TEST_F(SchedulerStoreTest, PrefetchDiscountsCopiesHeldWithTheOneItFetches) {
  Open(2 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true);
  std::vector<TensorId> t = Tensors(4, Tier::kHost);
  const TensorId a = t[0], b = t[1], w = t[2], m = t[3];
  auto group = [&] {
    auto held_w = store_->Acquire(w, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(held_w.ok()) << held_w.status();
    auto held_m = store_->Acquire(m, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(held_m.ok()) << held_m.status();
    ASSERT_TRUE(held_w->Release().ok());
    ASSERT_TRUE(held_m->Release().ok());
  };
  auto use_b = [&] {
    auto lease = store_->Acquire(b, Tier::kHost, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
  };
  store_->BeginStep();
  Use(a);
  use_b();
  group();
  store_->EndStep();
  store_->BeginStep();
  Use(a);
  ASSERT_EQ(OnDevice(m), State::kAbsent);
  use_b();
  barrier_->Wait();  // M's prefetch has run
  EXPECT_EQ(OnDevice(m), State::kClean);
  EXPECT_EQ(OnDevice(w), State::kClean);
  EXPECT_EQ(OnDevice(a), State::kAbsent);
  const uint64_t hits_before = store_->GetStats().prefetch.hit;
  group();
  EXPECT_EQ(store_->GetStats().prefetch.hit, hits_before + 1);
  store_->EndStep();
}

// An optimizer-style group again: W and M are held together, then X is read
// in host memory and N is used. Step A B W M X N on a device that holds
// three; every acquire waits for the prefetches it queued (the barrier
// stands in for compute) before its release. In step 2, while W and M are
// held, N (needed after X) would be prefetched onto a full device whose one
// unleased copy is A. Eviction on demand would take M then, released by
// X and next used after A, so the prefetch waits instead of evicting A
// (which would cost A a load in step 3); at X's acquire it evicts M, as on
// demand does, and N's acquire is a hit.
TEST_F(SchedulerStoreTest, PrefetchCountsALeaseThatEndsBeforeItsAccess) {
  Open(3 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true);
  std::vector<TensorId> t = Tensors(6, Tier::kHost);
  const TensorId a = t[0], b = t[1], w = t[2], m = t[3], x = t[4], n = t[5];
  auto held = [&](TensorId id, Tier tier) {
    absl::StatusOr<Lease> lease = store_->Acquire(id, tier, Access::kRead);
    EXPECT_TRUE(lease.ok()) << lease.status();
    barrier_->Wait();  // the prefetches it queued have run
    return lease;
  };
  auto used = [&](TensorId id, Tier tier) {
    const absl::StatusOr<Lease> lease = held(id, tier);  // released here
  };
  for (int step = 1; step <= 2; ++step) {
    store_->BeginStep();
    used(a, Tier::kDevice);
    used(b, Tier::kDevice);
    absl::StatusOr<Lease> held_w = held(w, Tier::kDevice);
    absl::StatusOr<Lease> held_m = held(m, Tier::kDevice);
    ASSERT_TRUE(held_w.ok() && held_m.ok());
    if (step == 2) {
      EXPECT_EQ(OnDevice(a), State::kClean) << "A is kept for step 3";
      EXPECT_EQ(OnDevice(n), State::kAbsent) << "N waits for M's release";
    }
    ASSERT_TRUE(held_w->Release().ok());
    ASSERT_TRUE(held_m->Release().ok());
    used(x, Tier::kHost);
    const uint64_t hits_before = store_->GetStats().prefetch.hit;
    used(n, Tier::kDevice);
    if (step == 2) {
      EXPECT_EQ(store_->GetStats().prefetch.hit, hits_before + 1);
      EXPECT_EQ(OnDevice(m), State::kAbsent);
      EXPECT_EQ(OnDevice(a), State::kClean);
    }
    store_->EndStep();
  }
}

// A layered loop: after each acquire the prefetches it queued run to the
// end (the barrier stands in for the layer's compute, long enough for any
// transfer), so from step 2 on the scheduler has the next layers on the
// device before they are acquired. The layers' contents stay in host
// memory, so their loads never read NVMe (the barrier's own read).
TEST_F(SchedulerStoreTest, PrefetchServesAReplayedLoop) {
  Open(4 * kMiB, EvictionPolicy::kBelady, /*prefetch=*/true);
  std::vector<TensorId> layers = Tensors(8, Tier::kHost);
  for (int step = 0; step < 4; ++step) {
    store_->BeginStep();
    for (int i = 0; i < 8; ++i) {
      Use(layers[i]);
      barrier_->Wait();
    }
    for (int i = 7; i >= 0; --i) {
      Use(layers[i]);
      barrier_->Wait();
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

// The NVMe read floor the store reports for the step it learned
// (scheduler/nvme_floor.h): four 1 MiB tensors read every step, 1 MiB of
// device and 2 MiB of host memory above NVMe. At every position one is
// leased and three wait, 1 MiB too many; a byte kept on NVMe for a whole
// wait covers three positions, so at least 4/3 MiB come from NVMe each
// step, whatever the schedule (short by at most what crosses the sweep's
// cut over its copies); and the store reads at least that.
TEST(SchedulerStoreFloorTest, ReportsTheFewestBytesAStepMustReadFromNvme) {
  ::strata::testing::TempDir dir;
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir.path(), kMiB,
                                                        2 * kMiB, 64 * kMiB);
  o.scheduler.prefetch = false;
  auto opened = Store::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  std::vector<TensorId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = store.Create(
        {.name = std::string(1, char('A' + i)), .size_bytes = kMiB});
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store.Write(*id, Pattern(kMiB, i).data(), kMiB).ok());
    ASSERT_TRUE(store.Evict(*id, Tier::kNvme).ok());
    ids.push_back(*id);
  }
  EXPECT_EQ(store.GetStats().scheduler.nvme_read_floor_bytes, 0u);  // none yet
  uint64_t read_before_last = 0;
  for (int step = 0; step < 4; ++step) {
    if (step == 3) {
      read_before_last =
          store.GetStats().links[static_cast<int>(Link::kNvmeRead)].bytes;
    }
    store.BeginStep();
    for (TensorId id : ids) {
      auto lease = store.Acquire(id, Tier::kDevice, Access::kRead);
      ASSERT_TRUE(lease.ok()) << lease.status();
    }
    store.EndStep();
  }
  const Stats s = store.GetStats();
  EXPECT_LE(s.scheduler.nvme_read_floor_bytes, 4 * kMiB / 3);
  EXPECT_GT(s.scheduler.nvme_read_floor_bytes, 4 * kMiB / 3 - kMiB / 1000);
  EXPECT_GE(s.links[static_cast<int>(Link::kNvmeRead)].bytes - read_before_last,
            kMiB);
}

}  // namespace
}  // namespace strata
