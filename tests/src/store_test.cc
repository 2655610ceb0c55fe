// Store behaviour on the simulated device: round trips of odd sizes through
// every tier and path, residency transitions, LRU eviction with write-back,
// and every misuse the API documents.
#include "strata/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>

#include "base/system_info.h"
#include "src/store_open.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::SmallStoreOptions;
using ::testing::HasSubstr;
using State = Residency::State;

class StoreTest : public ::testing::Test {
 protected:
  void Open(uint64_t device, uint64_t host, uint64_t nvme) {
    auto s = Store::Open(SmallStoreOptions(dir_.path(), device, host, nvme));
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void SetUp() override { Open(4 * kMiB, 4 * kMiB, 64 * kMiB); }

  TensorId MustCreate(uint64_t bytes, Tier home = Tier::kNvme,
                      const std::string& name = "t") {
    auto id = store_->Create({.name = name, .size_bytes = bytes, .home = home});
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }
  State StateOn(TensorId id, Tier t) {
    return store_->GetResidency(id)->tiers[static_cast<int>(t)];
  }

  ::strata::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

class OddSizeTest : public StoreTest,
                    public ::testing::WithParamInterface<uint64_t> {};

// Host -> NVMe -> device -> NVMe -> host, and device -> host, byte-exact.
TEST_P(OddSizeTest, RoundTripsThroughEveryTier) {
  const uint64_t n = GetParam();
  TensorId id = MustCreate(n);
  std::vector<std::byte> in = Pattern(n, 7), out(n);
  ASSERT_TRUE(store_->Write(id, in.data(), n).ok());
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  EXPECT_EQ(StateOn(id, Tier::kHost), State::kAbsent);
  EXPECT_EQ(StateOn(id, Tier::kNvme), State::kClean);
  {  // NVMe -> device through the bounce pipeline.
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(lease->size_bytes(), n);
    EXPECT_TRUE(MatchesPattern(lease->data(), n, 7));
  }
  {  // Device-written contents -> NVMe, then NVMe -> host.
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    FillPattern(lease->data(), n, 8);
  }
  EXPECT_EQ(StateOn(id, Tier::kNvme), State::kAbsent);
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  EXPECT_EQ(StateOn(id, Tier::kDevice), State::kAbsent);
  ASSERT_TRUE(store_->Read(id, out.data(), n).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), n, 8));
  {  // Device -> host directly.
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    FillPattern(lease->data(), n, 9);
  }
  ASSERT_TRUE(store_->Read(id, out.data(), n).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), n, 9));
}

INSTANTIATE_TEST_SUITE_P(Sizes, OddSizeTest,
                         ::testing::Values(1, 511, 4097, kMiB + 3));

TEST_F(StoreTest, HostHomeTensorRoundTripsThroughDevice) {
  TensorId id = MustCreate(4097, Tier::kHost);
  auto in = Pattern(4097, 3);
  ASSERT_TRUE(store_->Write(id, in.data(), in.size()).ok());
  {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok());
    EXPECT_TRUE(MatchesPattern(lease->data(), 4097, 3));
    FillPattern(lease->data(), 4097, 4);
  }
  EXPECT_EQ(StateOn(id, Tier::kDevice), State::kDirty);
  EXPECT_EQ(StateOn(id, Tier::kHost), State::kAbsent);
  ASSERT_TRUE(store_->Evict(id, Tier::kHost).ok());
  EXPECT_EQ(StateOn(id, Tier::kHost), State::kClean);
  std::vector<std::byte> out(4097);
  ASSERT_TRUE(store_->Read(id, out.data(), out.size()).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), out.size(), 4));
}

TEST_F(StoreTest, PartialWriteAndReadAtOffset) {
  TensorId id = MustCreate(10000);
  auto in = Pattern(10000, 1);
  ASSERT_TRUE(store_->Write(id, in.data(), in.size()).ok());
  auto patch = Pattern(100, 2);
  ASSERT_TRUE(store_->Write(id, patch.data(), 100, 5000).ok());
  std::vector<std::byte> out(10000);
  ASSERT_TRUE(store_->Read(id, out.data(), out.size()).ok());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), 5000), 0);
  EXPECT_EQ(std::memcmp(out.data() + 5000, patch.data(), 100), 0);
  EXPECT_EQ(std::memcmp(out.data() + 5100, in.data() + 5100, 4900), 0);
  EXPECT_EQ(store_->Read(id, out.data(), 10, 9995).code(),
            absl::StatusCode::kInvalidArgument);
}

// A device budget of three 1 MiB tensors: the least recently used copy goes
// first, and a dirty one is written back (to host, which has room) before it
// is dropped.
TEST_F(StoreTest, LruEvictionWritesBackDirtyCopies) {
  Open(3 * kMiB, 8 * kMiB, 64 * kMiB);
  TensorId a = MustCreate(kMiB, Tier::kNvme, "a");
  TensorId b = MustCreate(kMiB, Tier::kNvme, "b");
  TensorId c = MustCreate(kMiB, Tier::kNvme, "c");
  TensorId d = MustCreate(kMiB, Tier::kNvme, "d");
  for (TensorId id : {a, b, c}) {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    FillPattern(lease->data(), kMiB, id.value);
  }
  { auto touch = store_->Acquire(a, Tier::kDevice, Access::kRead); }
  EXPECT_EQ(store_->GetStats().room_seconds, 0);  // all fit so far
  {  // b is now least recently used.
    auto lease = store_->Acquire(d, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  EXPECT_EQ(StateOn(b, Tier::kDevice), State::kAbsent);
  EXPECT_EQ(StateOn(b, Tier::kHost), State::kDirty);
  EXPECT_EQ(StateOn(a, Tier::kDevice), State::kDirty);
  Stats stats = store_->GetStats();
  EXPECT_EQ(stats.write_backs, 1u);
  EXPECT_EQ(stats.tiers[0].evictions, 1u);
  // d's acquire waited for b's write-back: time spent making room, within
  // the acquire's stall.
  EXPECT_GT(stats.room_seconds, 0);
  EXPECT_LE(stats.room_seconds, stats.stall_seconds);
  std::vector<std::byte> out(kMiB);
  ASSERT_TRUE(store_->Read(b, out.data(), kMiB).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), kMiB, b.value));
}

// Dropping a clean victim costs no time making room: room_seconds counts
// only waits for write-backs (and for space in flight).
TEST_F(StoreTest, ACleanVictimCostsNoRoomTime) {
  Open(2 * kMiB, 8 * kMiB, 64 * kMiB);
  std::vector<TensorId> ids;
  for (const char* name : {"x", "y", "z"}) {
    ids.push_back(MustCreate(kMiB, Tier::kNvme, name));
    const auto in = Pattern(kMiB, ids.back().value);
    ASSERT_TRUE(store_->Write(ids.back(), in.data(), kMiB).ok());
  }
  for (TensorId id : ids) {  // the third evicts a clean device copy
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(MatchesPattern(lease->data(), kMiB, id.value));
  }
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.tiers[0].evictions, 1u);
  EXPECT_EQ(stats.write_backs, 0u);
  EXPECT_EQ(stats.room_seconds, 0);
}

// A tensor larger than the whole host tier still reaches the device and NVMe
// through the pinned bounce chunks.
TEST_F(StoreTest, TensorLargerThanHostGoesThroughBounceChunks) {
  Open(16 * kMiB, 1 * kMiB, 64 * kMiB);
  const uint64_t n = 10 * kMiB + 5;
  TensorId id = MustCreate(n);
  {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    FillPattern(lease->data(), n, 5);
  }
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(MatchesPattern(lease->data(), n, 5));
  EXPECT_EQ(store_->Acquire(id, Tier::kHost, Access::kRead).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(StoreTest, WriteLeaseOnNewTensorPresentsZeros) {
  TensorId id = MustCreate(5000);
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kWrite);
  ASSERT_TRUE(lease.ok());
  std::vector<std::byte> zeros(5000);
  EXPECT_EQ(std::memcmp(lease->data(), zeros.data(), 5000), 0);
}

// A prefetch loads the copy ahead of its acquire, which is then a hit. The
// gate holds the prefetch's NVMe read to show the copy loading before
// anyone asked; PausePrefetch returns once that load has finished.
TEST_F(StoreTest, PrefetchLoadsAheadAndCountsHit) {
  FaultyBlockIo* io = nullptr;
  StoreSeams seams;
  seams.wrap_block_io = [&io](std::unique_ptr<BlockIo> b) {
    auto f = std::make_unique<FaultyBlockIo>(std::move(b), FaultSpec{});
    io = f.get();
    return f;
  };
  store_.reset();
  auto s = OpenStore(
      SmallStoreOptions(dir_.path(), 4 * kMiB, 4 * kMiB, 64 * kMiB), seams);
  ASSERT_TRUE(s.ok()) << s.status();
  store_ = std::move(*s);
  TensorId id = MustCreate(kMiB);
  auto in = Pattern(kMiB, 11);
  ASSERT_TRUE(store_->Write(id, in.data(), kMiB).ok());
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  io->gate().Arm(GateOp::kNvmeRead);
  ASSERT_TRUE(store_->Prefetch(id, Tier::kDevice).ok());
  ASSERT_TRUE(io->gate().WaitUntilHeld(GateOp::kNvmeRead));
  EXPECT_EQ(StateOn(id, Tier::kDevice), State::kLoading);
  io->gate().Release(GateOp::kNvmeRead);
  store_->PausePrefetch(true);  // the load in flight finishes first
  store_->PausePrefetch(false);
  ASSERT_EQ(StateOn(id, Tier::kDevice), State::kClean);
  const uint64_t stalled = store_->GetStats().stalled_acquires;
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(MatchesPattern(lease->data(), kMiB, 11));
  Stats stats = store_->GetStats();
  EXPECT_EQ(stats.prefetch.issued, 1u);
  EXPECT_EQ(stats.prefetch.hit, 1u);
  EXPECT_EQ(stats.stalled_acquires, stalled) << "the hit waited for nothing";
}

// Every prefetch ends up counted once: hit, late, wasted or failed, even when
// the acquire comes before the background load has started.
TEST_F(StoreTest, PrefetchAccountingAddsUp) {
  std::vector<TensorId> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back(MustCreate(256 * 1024));
    ASSERT_TRUE(
        store_->Write(ids.back(), Pattern(256 * 1024, i).data(), 256 * 1024)
            .ok());
    ASSERT_TRUE(store_->Evict(ids.back(), Tier::kNvme).ok());
  }
  for (TensorId id : ids) {
    ASSERT_TRUE(store_->Prefetch(id, Tier::kDevice).ok());
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);  // at once
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  const PrefetchStats p = store_->GetStats().prefetch;
  EXPECT_EQ(p.issued, 8u);
  EXPECT_EQ(p.hit + p.late + p.wasted + p.failed, 8u)
      << "hit " << p.hit << " late " << p.late << " wasted " << p.wasted;
}

TEST_F(StoreTest, SizesInMessagesKeepExactBytes) {
  TensorId id = MustCreate(3 * kMiB + 3, Tier::kNvme, "odd");
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lease->Release().ok());
  TensorId big = MustCreate(3 * kMiB + 3, Tier::kNvme, "big");
  {
    auto held = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(held.ok());
    auto s = store_->Acquire(big, Tier::kDevice, Access::kOverwrite).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(s.message(), HasSubstr("3.0 MiB (3145731 bytes)"));
  }
}

TEST_F(StoreTest, DiscardDropsContentsWithoutWriteBack) {
  TensorId id = MustCreate(4096);
  auto in = Pattern(4096, 1);
  ASSERT_TRUE(store_->Write(id, in.data(), 4096).ok());
  const uint64_t written = store_->GetStats().links[3].bytes;
  ASSERT_TRUE(store_->Discard(id).ok());
  EXPECT_EQ(store_->GetStats().links[3].bytes, written);
  EXPECT_FALSE(store_->GetResidency(id)->has_contents);
  auto lease = store_->Acquire(id, Tier::kHost, Access::kRead);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(lease.status().message(), HasSubstr("no contents"));
  EXPECT_TRUE(store_->Acquire(id, Tier::kHost, Access::kOverwrite).ok());
}

TEST_F(StoreTest, BadSpecsAreRefused) {
  EXPECT_EQ(store_->Create({.name = "z", .size_bytes = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Create({.size_bytes = uint64_t{1} << 62}).status().code(),
            absl::StatusCode::kInvalidArgument);
  TensorSpec shaped{
      .name = "s", .size_bytes = 10, .dtype = DType::kFloat32, .shape = {2, 2}};
  EXPECT_EQ(store_->Create(shaped).status().code(),
            absl::StatusCode::kInvalidArgument);
  shaped.size_bytes = 16;
  EXPECT_TRUE(store_->Create(shaped).ok());
  auto big = store_->Create({.name = "huge", .size_bytes = 65 * kMiB});
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("--nvme-budget"));
}

TEST_F(StoreTest, TensorLargerThanDeviceBudgetIsExplained) {
  TensorId id = MustCreate(5 * kMiB, Tier::kNvme, "w3");
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(lease.status().message(),
              HasSubstr("tensor 'w3' is 5 MiB; the device budget is 4 MiB: "
                        "raise --device-budget"));
}

TEST_F(StoreTest, UnknownAndDestroyedIdsAreNotFound) {
  EXPECT_EQ(store_->Acquire(TensorId{999}, Tier::kHost, Access::kRead)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  TensorId id = MustCreate(100);
  ASSERT_TRUE(store_->Destroy(id).ok());
  EXPECT_EQ(store_->Destroy(id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Prefetch(id, Tier::kDevice).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetStats().tensors, 0u);
}

TEST_F(StoreTest, LeaseRulesAreEnforced) {
  TensorId id = MustCreate(100);
  ASSERT_TRUE(store_->Write(id, Pattern(100, 1).data(), 100).ok());
  auto r1 = store_->Acquire(id, Tier::kHost, Access::kRead);
  auto r2 = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(store_->Acquire(id, Tier::kDevice, Access::kWrite).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Destroy(id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Evict(id, Tier::kNvme).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Discard(id).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(r1->Release().ok());
  EXPECT_EQ(r1->Release().code(), absl::StatusCode::kFailedPrecondition);
  Lease moved = std::move(*r2);
  EXPECT_EQ(r2->Release().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(moved.Release().ok());
  EXPECT_TRUE(store_->Destroy(id).ok());
}

TEST_F(StoreTest, BadTiersAreRefused) {
  TensorId id = MustCreate(100, Tier::kHost);
  EXPECT_EQ(
      store_->Acquire(id, Tier::kNvme, Access::kOverwrite).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Evict(id, Tier::kNvme).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, LeaseOutlivingItsStoreFailsCleanly) {
  TensorId id = MustCreate(100);
  auto lease = store_->Acquire(id, Tier::kHost, Access::kOverwrite);
  ASSERT_TRUE(lease.ok());
  store_.reset();
  absl::Status s = lease->Release();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("closed"));
}

TEST_F(StoreTest, TierFullOfLeasesListsHolders) {
  TensorId a = MustCreate(2 * kMiB, Tier::kNvme, "alpha");
  TensorId b = MustCreate(2 * kMiB, Tier::kNvme, "beta");
  TensorId c = MustCreate(kMiB, Tier::kNvme, "gamma");
  auto la = store_->Acquire(a, Tier::kDevice, Access::kOverwrite);
  auto lb = store_->Acquire(b, Tier::kDevice, Access::kOverwrite);
  ASSERT_TRUE(la.ok() && lb.ok());
  auto lc = store_->Acquire(c, Tier::kDevice, Access::kOverwrite);
  EXPECT_EQ(lc.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(lc.status().message(), HasSubstr("'alpha'"));
  EXPECT_THAT(lc.status().message(), HasSubstr("write lease"));
  ASSERT_TRUE(la->Release().ok());
  EXPECT_TRUE(store_->Acquire(c, Tier::kDevice, Access::kOverwrite).ok());
}

TEST(StoreOpenTest, BadOptionsAreRefused) {
  ::strata::testing::TempDir dir;
  StoreOptions o = SmallStoreOptions(dir.path(), kMiB, kMiB, 8 * kMiB);
  o.nvme.directories = {dir.path() + "/missing"};
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kNotFound);
  o = SmallStoreOptions(dir.path(), kMiB, kMiB, uint64_t{1} << 50);
  auto s = Store::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  o = SmallStoreOptions(dir.path(), kMiB, uint64_t{1} << 50, 8 * kMiB);
  EXPECT_EQ(Store::Open(o).status().code(),
            absl::StatusCode::kResourceExhausted);
  // The simulated device is host memory: with the host tier it must fit.
  o = SmallStoreOptions(dir.path(), PhysicalMemoryBytes(), 64 * kMiB, 8 * kMiB);
  s = Store::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.status().message(),
              HasSubstr("simulated device lives in host memory"));
  o = SmallStoreOptions(dir.path(), 0, kMiB, 8 * kMiB);
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallStoreOptions(dir.path(), kMiB, kMiB, 8 * kMiB);
  o.nvme.block_size_bytes = 1000;
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.nvme.block_size_bytes = 4096;
  o.nvme.directories.clear();
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(StoreOpenTest, StoreWithoutNvmeRefusesNvmeHome) {
  StoreOptions o;
  o.device.backend = DeviceBackendKind::kSimulated;
  o.device.budget_bytes = kMiB;
  o.host.budget_bytes = kMiB;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Create({.size_bytes = 10}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*store)->Create({.size_bytes = 10, .home = Tier::kHost}).ok());
  EXPECT_THAT((*store)->DescribeTiers(), HasSubstr("simulated"));
}

}  // namespace
}  // namespace strata
