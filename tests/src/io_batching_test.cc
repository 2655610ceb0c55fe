// Tests that the store keeps several NVMe requests in flight where one at a
// time would pay a device latency each (issue: offload at the bound): the
// write-backs that make room for one allocation run together, small
// prefetches run together within the automatic window, and small host copies
// stay in host memory while larger ones are evicted. Concurrency is shown by
// requests parked at the FaultyBlockIo gate at once, never by timing.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/race_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

class IoBatchingTest : public ::testing::Test {
 protected:
  // A 1 MiB host tier over NVMe (64 KiB blocks: the automatic prefetch
  // window).
  void Open(bool prefetch) {
    StoreOptions o = ::strata::testing::SmallStoreOptions(dir_.path(), kMiB,
                                                          kMiB, 32 * kMiB);
    o.scheduler.prefetch = prefetch;
    StoreSeams seams;
    seams.wrap_block_io = [this](std::unique_ptr<BlockIo> b) {
      auto f = std::make_unique<FaultyBlockIo>(std::move(b), FaultSpec{});
      io_ = f.get();
      return f;
    };
    auto s = OpenStore(o, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    if (io_ != nullptr) io_->gate().ReleaseAll();
  }

  // A tensor homed on NVMe whose only copy is a dirty one in host memory.
  TensorId DirtyOnHost(uint64_t bytes, uint64_t seed) {
    const TensorId id = *store_->Create(
        {.name = "t" + std::to_string(seed), .size_bytes = bytes});
    auto lease = store_->Acquire(id, Tier::kHost, Access::kOverwrite);
    EXPECT_TRUE(lease.ok()) << lease.status();
    const std::vector<std::byte> p = Pattern(bytes, seed);
    std::memcpy(lease->data(), p.data(), bytes);
    EXPECT_TRUE(lease->Release().ok());
    return id;
  }
  Residency::State HostState(TensorId id) {
    return store_->GetResidency(id)->tiers[static_cast<int>(Tier::kHost)];
  }
  void ExpectContents(TensorId id, uint64_t bytes, uint64_t seed) {
    std::vector<std::byte> got(bytes);
    ASSERT_TRUE(store_->Read(id, got.data(), bytes).ok());
    EXPECT_TRUE(MatchesPattern(got.data(), bytes, seed)) << "tensor " << seed;
  }

  ::strata::testing::TempDir dir_;
  FaultyBlockIo* io_ = nullptr;
  std::unique_ptr<Store> store_;
};

// Room for 512 KiB on a full host tier of 128 KiB dirty copies: four
// write-backs, all in flight at once (one on the acquiring thread, three
// companions on transfer threads). Serially, the second would never park
// while the first is held, and the wait would fail.
TEST_F(IoBatchingTest, WriteBacksThatMakeRoomRunTogether) {
  Open(/*prefetch=*/false);
  std::vector<TensorId> ids;
  for (uint64_t i = 0; i < 8; ++i) ids.push_back(DirtyOnHost(128 * kKiB, i));
  const TensorId big =
      *store_->Create({.name = "big", .size_bytes = 512 * kKiB});
  io_->gate().Arm(GateOp::kNvmeWrite, 4);
  std::thread acquirer([&] {
    auto lease = store_->Acquire(big, Tier::kHost, Access::kOverwrite);
    EXPECT_TRUE(lease.ok()) << lease.status();
  });
  EXPECT_TRUE(io_->gate().WaitUntilHeld(GateOp::kNvmeWrite, 4));
  io_->gate().Release(GateOp::kNvmeWrite);
  acquirer.join();
  // The four least recently used went home; nothing was lost.
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(HostState(ids[i]),
              i < 4 ? Residency::State::kAbsent : Residency::State::kDirty)
        << i;
  }
  for (uint64_t i = 0; i < 8; ++i) ExpectContents(ids[i], 128 * kKiB, i);
}

// Four 4 KiB prefetches from NVMe fit in the 64 KiB window together: all
// four reads are in flight at once.
TEST_F(IoBatchingTest, SmallPrefetchesRunTogether) {
  Open(/*prefetch=*/true);
  std::vector<TensorId> ids;
  for (uint64_t i = 0; i < 4; ++i) {
    ids.push_back(DirtyOnHost(4 * kKiB, 10 + i));
    ASSERT_TRUE(store_->Evict(ids.back(), Tier::kNvme).ok());
  }
  io_->gate().Arm(GateOp::kNvmeRead, 4);
  for (TensorId id : ids) ASSERT_TRUE(store_->Prefetch(id, Tier::kHost).ok());
  EXPECT_TRUE(io_->gate().WaitUntilHeld(GateOp::kNvmeRead, 4));
  io_->gate().Release(GateOp::kNvmeRead);
  EXPECT_TRUE(::strata::testing::WaitUntil([&] {
    for (TensorId id : ids) {
      if (HostState(id) != Residency::State::kClean) return false;
    }
    return true;
  }));
  for (uint64_t i = 0; i < 4; ++i) ExpectContents(ids[i], 4 * kKiB, 10 + i);
}

// The oldest copies are small: without the small-copy rule LRU would evict
// them first; with it the 128 KiB copies go and the small ones stay.
TEST_F(IoBatchingTest, SmallHostCopiesStayWhileLargerOnesGo) {
  Open(/*prefetch=*/false);
  std::vector<TensorId> small;
  for (uint64_t i = 0; i < 8; ++i) small.push_back(DirtyOnHost(4 * kKiB, i));
  std::vector<TensorId> large;
  for (uint64_t i = 0; i < 7; ++i) {
    large.push_back(DirtyOnHost(128 * kKiB, 100 + i));
  }
  // 32 KiB + 896 KiB in use; 256 KiB more needs two large copies out.
  const TensorId more =
      *store_->Create({.name = "more", .size_bytes = 256 * kKiB});
  ASSERT_TRUE(store_->Acquire(more, Tier::kHost, Access::kOverwrite).ok());
  for (TensorId id : small) EXPECT_EQ(HostState(id), Residency::State::kDirty);
  EXPECT_EQ(HostState(large[0]), Residency::State::kAbsent);
  EXPECT_EQ(HostState(large[1]), Residency::State::kAbsent);
  EXPECT_EQ(HostState(large[2]), Residency::State::kDirty);
  for (uint64_t i = 0; i < 7; ++i)
    ExpectContents(large[i], 128 * kKiB, 100 + i);
}

// A small tensor's device load from NVMe leaves a host copy behind, on the
// acquire path and on the prefetch path, so its next device load reads host
// memory, not NVMe.
TEST_F(IoBatchingTest, SmallTensorsReachTheDeviceThroughHostMemory) {
  Open(/*prefetch=*/false);
  const TensorId a = DirtyOnHost(4 * kKiB, 20);
  const TensorId b = DirtyOnHost(4 * kKiB, 21);
  for (TensorId id : {a, b}) ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  const auto reads = [&] {
    return store_->GetStats().links[int(Link::kNvmeRead)].transfers;
  };
  const uint64_t before = reads();
  ASSERT_TRUE(store_->Acquire(a, Tier::kDevice, Access::kRead).ok());
  ASSERT_TRUE(store_->Prefetch(b, Tier::kDevice).ok());
  EXPECT_TRUE(::strata::testing::WaitUntil([&] {
    return store_->GetResidency(b)->tiers[int(Tier::kDevice)] ==
           Residency::State::kClean;
  }));
  EXPECT_EQ(reads(), before + 2);
  for (TensorId id : {a, b}) {
    EXPECT_EQ(HostState(id), Residency::State::kClean);
    ASSERT_TRUE(store_->Evict(id, Tier::kHost).ok());  // off the device
    ASSERT_TRUE(store_->Acquire(id, Tier::kDevice, Access::kRead).ok());
  }
  EXPECT_EQ(reads(), before + 2);  // both came back from host memory
  ExpectContents(a, 4 * kKiB, 20);
  ExpectContents(b, 4 * kKiB, 21);
}

}  // namespace
}  // namespace strata
