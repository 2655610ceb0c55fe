// Unified-memory mode on the simulated device: a device copy is the host
// copy's managed pages, moved by prefetch hints (or, without hints, by
// faults); the lease pointer is the same on both tiers; the managed-memory
// cap refuses oversubscription; a failed hint loses nothing; no reader is
// granted pages while they are being discarded (forced with a gate).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/race_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::AcquiresObserved;
using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::PrefetchBarrier;
using ::strata::testing::WaitUntil;
using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1024;

class UnifiedStoreTest : public ::testing::Test {
 protected:
  void Open(bool hints = true, uint64_t device_bytes = 1 * kMiB) {
    StoreOptions o = ::strata::testing::SmallStoreOptions(
        dir_.path(), device_bytes, 4 * kMiB, 32 * kMiB);
    o.device.memory = DeviceMemory::kUnified;
    o.device.unified_hints = hints;
    o.scheduler.prefetch_threads = 1;  // in queue order, for PrefetchBarrier
    StoreSeams seams;
    seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
      auto f = std::make_unique<FaultyDevice>(std::move(d));
      faults_ = f.get();
      return f;
    };
    seams.wrap_block_io = [this](std::unique_ptr<BlockIo> b) {
      auto f = std::make_unique<FaultyBlockIo>(std::move(b), FaultSpec{});
      io_ = f.get();
      return f;
    };
    auto store = OpenStore(o, seams);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  TensorId Make(uint64_t bytes, uint64_t seed, Tier home = Tier::kHost) {
    auto id = store_->Create({.name = "t", .size_bytes = bytes, .home = home});
    EXPECT_TRUE(id.ok()) << id.status();
    std::vector<std::byte> data(bytes);
    FillPattern(data.data(), bytes, seed);
    EXPECT_TRUE(store_->Write(*id, data.data(), bytes).ok());
    return *id;
  }

  // Acquires on `tier` for reading and releases; returns the pointer.
  void* Touch(TensorId id, Tier tier) {
    auto lease = store_->Acquire(id, tier, Access::kRead);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) return nullptr;
    void* p = lease->data();
    EXPECT_TRUE(lease->Release().ok());
    return p;
  }

  bool Holds(TensorId id, uint64_t bytes, uint64_t seed) {
    std::vector<std::byte> out(bytes);
    absl::Status st = store_->Read(id, out.data(), bytes);
    EXPECT_TRUE(st.ok()) << st;
    return st.ok() && MatchesPattern(out.data(), bytes, seed);
  }

  uint64_t LinkBytes(Link link) {
    return store_->GetStats().links[static_cast<int>(link)].bytes;
  }

  ::strata::testing::TempDir dir_;
  FaultyDevice* faults_ = nullptr;  // owned by store_
  FaultyBlockIo* io_ = nullptr;     // owned by store_
  std::unique_ptr<Store> store_;
};

TEST_F(UnifiedStoreTest, LeasePointerIsTheSameOnBothTiers) {
  Open();
  const TensorId id = Make(64 * kKiB, 1);
  void* on_device = Touch(id, Tier::kDevice);
  void* on_host = Touch(id, Tier::kHost);
  EXPECT_EQ(on_device, on_host);
  EXPECT_TRUE(Holds(id, 64 * kKiB, 1));
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.device_memory, "unified");
  EXPECT_THAT(store_->DescribeTiers(), HasSubstr("managed memory"));
}

TEST_F(UnifiedStoreTest, DeviceAcquireIsAPrefetchHintAndADemandFault) {
  Open();
  const uint64_t size = 96 * kKiB + 5;
  const TensorId id = Make(size, 2);
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.unified.prefetches, 1u);
  EXPECT_EQ(stats.unified.faults, 1u);
  EXPECT_EQ(stats.unified.fault_bytes, size);
  EXPECT_EQ(stats.links[static_cast<int>(Link::kH2D)].bytes, size);
  auto residency = store_->GetResidency(id);
  ASSERT_TRUE(residency.ok());
  EXPECT_EQ(residency->tiers[0], Residency::State::kClean);
  EXPECT_NE(residency->tiers[1], Residency::State::kAbsent);
  // Resident now: a second acquire moves nothing.
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  EXPECT_EQ(LinkBytes(Link::kH2D), size);
}

TEST_F(UnifiedStoreTest, EvictionIsAPrefetchToHostAndKeepsTheData) {
  Open();
  constexpr uint64_t kSize = 512 * kKiB;
  std::vector<TensorId> ids;
  for (uint64_t i = 0; i < 3; ++i) ids.push_back(Make(kSize, 10 + i));
  for (TensorId id : ids) ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  const Stats stats = store_->GetStats();
  // A 1 MiB device holds two: the third evicted one.
  EXPECT_EQ(stats.unified.evictions, 1u);
  EXPECT_EQ(stats.links[static_cast<int>(Link::kD2H)].bytes, kSize);
  EXPECT_EQ(stats.tiers[0].used_bytes, 2 * kSize);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(Holds(ids[i], kSize, 10 + i));
}

TEST_F(UnifiedStoreTest, OverwriteMovesNoBytesAndDiscardIsAHint) {
  Open();
  constexpr uint64_t kSize = 128 * kKiB;
  const TensorId id = Make(kSize, 3);
  {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    FillPattern(lease->data(), kSize, 4);
    ASSERT_TRUE(lease->Release().ok());
  }
  Stats stats = store_->GetStats();
  EXPECT_EQ(LinkBytes(Link::kH2D), 0u);  // dead contents never crossed
  EXPECT_EQ(stats.unified.discards, 1u);
  EXPECT_EQ(stats.unified.prefetches, 0u);
  EXPECT_EQ(stats.unified.faults, 0u);
  EXPECT_TRUE(Holds(id, kSize, 4));
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  ASSERT_TRUE(store_->Discard(id).ok());
  stats = store_->GetStats();
  EXPECT_EQ(stats.unified.discards, 2u);
  EXPECT_EQ(stats.tiers[0].used_bytes, 0u);
  auto residency = store_->GetResidency(id);
  ASSERT_TRUE(residency.ok());
  EXPECT_FALSE(residency->has_contents);
}

TEST_F(UnifiedStoreTest, WithoutHintsPagesMoveByFaultsOnly) {
  Open(/*hints=*/false);
  constexpr uint64_t kSize = 512 * kKiB;
  std::vector<TensorId> ids;
  for (uint64_t i = 0; i < 3; ++i) ids.push_back(Make(kSize, 20 + i));
  for (TensorId id : ids) ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.device_memory, "unified-no-hints");
  EXPECT_EQ(stats.unified.prefetches, 0u);
  EXPECT_EQ(stats.unified.evictions, 0u);
  EXPECT_EQ(stats.unified.faults, 3u);
  EXPECT_EQ(stats.unified.fault_bytes, 3 * kSize);
  EXPECT_EQ(LinkBytes(Link::kH2D), 3 * kSize);
  // The evicted one's pages come back by faults too, not by a hint.
  EXPECT_EQ(LinkBytes(Link::kD2H), kSize);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_TRUE(Holds(ids[i], kSize, 20 + i));
}

// Four 256 KiB layers through a 512 KiB device, step after step: the
// scheduler's prefetches are hints that arrive before their acquires. From
// step 2 on, each acquire is followed by `barrier` (when given): the hints
// it queued have run before the next acquire, as a layer's compute would
// allow.
uint64_t RunLayers(Store& store, const std::vector<TensorId>& layers, int steps,
                   PrefetchBarrier* barrier) {
  for (int s = 0; s < steps; ++s) {
    store.BeginStep();
    for (size_t i = 0; i < layers.size(); ++i) {
      auto lease = store.Acquire(layers[i], Tier::kDevice, Access::kRead);
      EXPECT_TRUE(lease.ok()) << lease.status();
      if (!lease.ok()) return 0;
      if (s > 0 && barrier != nullptr) barrier->Wait();
      EXPECT_TRUE(lease->Release().ok());
    }
    store.EndStep();
  }
  return store.GetStats().prefetch.hit;
}

TEST_F(UnifiedStoreTest, SchedulerPrefetchesAreHintsThatHit) {
  Open(/*hints=*/true, /*device_bytes=*/512 * kKiB);
  std::vector<TensorId> layers;
  for (uint64_t i = 0; i < 4; ++i) layers.push_back(Make(256 * kKiB, 30 + i));
  PrefetchBarrier barrier(store_.get(), io_);  // the layers live in host memory
  const uint64_t hits = RunLayers(*store_, layers, 4, &barrier);
  const Stats stats = store_->GetStats();
  EXPECT_GT(hits, 0u);
  EXPECT_GT(stats.unified.prefetches, stats.unified.faults);
  EXPECT_EQ(stats.prefetch.failed, 0u);
}

TEST_F(UnifiedStoreTest, WithoutHintsTheSchedulerDoesNotPrefetchToTheDevice) {
  Open(/*hints=*/false, /*device_bytes=*/512 * kKiB);
  std::vector<TensorId> layers;
  for (uint64_t i = 0; i < 4; ++i) layers.push_back(Make(256 * kKiB, 40 + i));
  const uint64_t stalled_writes = store_->GetStats().stalled_acquires;
  // No hint is ever queued, so there is nothing to wait for.
  EXPECT_EQ(RunLayers(*store_, layers, 4, /*barrier=*/nullptr), 0u);
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.prefetch.issued, 0u);
  // Every acquire that found its layer gone faulted it in (Belady keeps
  // some resident across steps).
  EXPECT_EQ(stats.unified.faults, stats.stalled_acquires - stalled_writes);
  EXPECT_GE(stats.unified.faults, 8u);
}

TEST_F(UnifiedStoreTest, ReadMostlyOnlyForTensorsAStepDoesNotWrite) {
  Open();
  constexpr uint64_t kSize = 128 * kKiB;
  const TensorId weight = Make(kSize, 50);
  const TensorId grad = Make(kSize, 51);
  // Make's writes come before the first step and do not count: the weight
  // is "read only" in step 1 and advised when step 2 loads it.
  for (int step = 0; step < 3; ++step) {
    store_->BeginStep();
    ASSERT_NE(Touch(weight, Tier::kDevice), nullptr);
    auto lease = store_->Acquire(grad, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok());
    FillPattern(lease->data(), kSize, 52 + step);
    ASSERT_TRUE(lease->Release().ok());
    store_->EndStep();
    // Off the device, so the next step loads (and advises) them again.
    ASSERT_TRUE(store_->Evict(weight, Tier::kHost).ok());
    ASSERT_TRUE(store_->Evict(grad, Tier::kHost).ok());
  }
  Stats stats = store_->GetStats();
  EXPECT_EQ(stats.unified.read_mostly, 1u);  // the weight, from step 2
  // Its host duplicate is valid: its evictions after steps 2 and 3 moved
  // nothing, while its first and the gradient's three did.
  EXPECT_EQ(stats.unified.evictions, 4u);
  EXPECT_EQ(LinkBytes(Link::kD2H), 4 * kSize);
  EXPECT_TRUE(Holds(weight, kSize, 50));
  EXPECT_TRUE(Holds(grad, kSize, 54));
}

TEST_F(UnifiedStoreTest, HostOverwriteOfResidentTensorDiscardsAndStalls) {
  Open();
  constexpr uint64_t kSize = 256 * kKiB;
  const TensorId id = Make(kSize, 80);
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  const Stats before = store_->GetStats();
  std::vector<std::byte> data(kSize);
  FillPattern(data.data(), kSize, 81);
  ASSERT_TRUE(store_->Write(id, data.data(), kSize).ok());  // whole: dead
  Stats after = store_->GetStats();
  EXPECT_EQ(LinkBytes(Link::kD2H), 0u);  // old contents never came back
  EXPECT_EQ(after.unified.discards, before.unified.discards + 1);
  EXPECT_EQ(after.stalled_acquires, before.stalled_acquires + 1);
  EXPECT_TRUE(Holds(id, kSize, 81));
  // A host read of a resident tensor brings its pages back, and stalls.
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);
  const uint64_t stalled = store_->GetStats().stalled_acquires;
  ASSERT_NE(Touch(id, Tier::kHost), nullptr);
  after = store_->GetStats();
  EXPECT_EQ(LinkBytes(Link::kD2H), kSize);
  EXPECT_EQ(after.stalled_acquires, stalled + 1);
}

// A discard that leaves the range undefined, as a GPU's may, before it
// reaches the gate: while the gate holds it, the pages are scribbled over.
class ScribblingDiscard : public FaultyDevice {
 public:
  using FaultyDevice::FaultyDevice;
  absl::Status DiscardManaged(absl::Span<const ManagedRange> ranges) override {
    for (const ManagedRange& r : ranges) std::memset(r.ptr, 0xdd, r.bytes);
    return FaultyDevice::DiscardManaged(ranges);
  }
};

// A whole Write of a resident tensor discards its dead pages; a reader that
// comes while the discard runs must wait for the write, then see its bytes.
// The gate holds the discard (pages scribbled) until the reader is provably
// waiting: an acquire holds the store's lock from being observed until it
// waits, and it cannot be granted before the discard is let go.
TEST_F(UnifiedStoreTest, NoReaderSeesContentsBeingDiscarded) {
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir_.path(), kMiB,
                                                        4 * kMiB, 32 * kMiB);
  o.device.memory = DeviceMemory::kUnified;
  StoreSeams seams;
  seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
    auto f = std::make_unique<ScribblingDiscard>(std::move(d));
    faults_ = f.get();
    return f;
  };
  auto store = OpenStore(o, seams);
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = std::move(*store);
  constexpr uint64_t kSize = 64 * kKiB;
  const TensorId id = Make(kSize, 300);
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);  // resident
  std::vector<std::byte> fresh(kSize);
  FillPattern(fresh.data(), kSize, 301);
  Gate& gate = faults_->gate();
  gate.Arm(GateOp::kDiscard);
  std::thread writer([&] {  // a whole write: the old contents are discarded
    EXPECT_TRUE(store_->Write(id, fresh.data(), kSize).ok());
  });
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kDiscard));
  EXPECT_EQ(store_->GetResidency(id)->tiers[0], Residency::State::kEvicting);
  const uint64_t observed = AcquiresObserved(*store_);
  std::atomic<bool> saw_write{false}, saw_discard{false}, granted{false};
  std::thread reader([&] {
    // Once the discard is let go, the Write takes its own short host lease
    // to copy the bytes in: a reader that comes then is refused
    // (FailedPrecondition, no waiting on leases) and asks again.
    absl::StatusOr<Lease> lease;
    for (int tries = 0; tries < 1000000; ++tries) {
      lease = store_->Acquire(id, Tier::kHost, Access::kRead);
      if (!absl::IsFailedPrecondition(lease.status())) break;
      std::this_thread::yield();
    }
    ASSERT_TRUE(lease.ok()) << lease.status();
    granted = true;
    saw_write = MatchesPattern(lease->data(), kSize, 301);
    saw_discard = static_cast<unsigned char*>(lease->data())[0] == 0xdd;
    EXPECT_TRUE(lease->Release().ok());
  });
  ASSERT_TRUE(WaitUntil([&] { return AcquiresObserved(*store_) > observed; }));
  EXPECT_FALSE(granted) << "a reader was granted pages being discarded";
  gate.Release(GateOp::kDiscard);
  writer.join();
  reader.join();
  EXPECT_TRUE(saw_write) << "the reader did not see the whole write";
  EXPECT_FALSE(saw_discard) << "the reader saw discarded (scribbled) pages";
  EXPECT_EQ(gate.held(GateOp::kDiscard), 1u);
  EXPECT_TRUE(Holds(id, kSize, 301));
}

TEST_F(UnifiedStoreTest, ResidencyIsChargedInWholePages) {
  Open(/*hints=*/true, /*device_bytes=*/64 * kKiB);
  std::vector<Lease> leases;
  for (uint64_t i = 0; i < 16; ++i) {
    const TensorId id = Make(100, 90 + i);
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    leases.push_back(std::move(*lease));
  }
  EXPECT_EQ(store_->GetStats().tiers[0].used_bytes, 64 * kKiB);
  const TensorId one_more = Make(100, 200);
  auto refused = store_->Acquire(one_more, Tier::kDevice, Access::kRead);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  for (Lease& l : leases) EXPECT_TRUE(l.Release().ok());
}

TEST_F(UnifiedStoreTest, NoReadMostlyForATensorAcquiredToWrite) {
  Open();
  constexpr uint64_t kSize = 64 * kKiB;
  const TensorId id = Make(kSize, 95);
  store_->BeginStep();
  ASSERT_NE(Touch(id, Tier::kDevice), nullptr);  // only read in step 1
  store_->EndStep();
  ASSERT_TRUE(store_->Evict(id, Tier::kHost).ok());
  store_->BeginStep();
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kWrite);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(lease->Release().ok());
  store_->EndStep();
  EXPECT_EQ(store_->GetStats().unified.read_mostly, 0u);
}

TEST_F(UnifiedStoreTest, ManagedMemoryCapRefusesOversubscription) {
  StoreOptions o =
      ::strata::testing::SmallStoreOptions(dir_.path(), kMiB, kGiB, 32 * kMiB);
  o.device.memory = DeviceMemory::kUnified;
  o.device.sim_memory_bytes = kGiB;  // a 1 GiB GPU cannot hold 1 GiB managed
  auto refused = Store::Open(o);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("asked for 1 GiB of managed memory"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("1 GiB free, less a 256 MiB margin = 768 MiB usable"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("lower --host-budget to at most 768 MiB"));
  o.host.budget_bytes = 768 * kMiB;  // exactly what fits: accepted
  EXPECT_TRUE(Store::Open(o).ok());
}

TEST_F(UnifiedStoreTest, DeviceBudgetAboveTheHostBudgetIsRefused) {
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir_.path(), 8 * kMiB,
                                                        4 * kMiB, 32 * kMiB);
  o.device.memory = DeviceMemory::kUnified;
  auto refused = Store::Open(o);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("cannot exceed the host budget"));
}

TEST_F(UnifiedStoreTest, DeviceHomeIsRefused) {
  Open();
  auto id = store_->Create(
      {.name = "pinned", .size_bytes = 4096, .home = Tier::kDevice});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("unified-memory mode"));
}

TEST_F(UnifiedStoreTest, FailedPrefetchHintLosesNothing) {
  Open();
  constexpr uint64_t kSize = 200 * kKiB;
  const TensorId id = Make(kSize, 60);
  faults_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(lease.status().message(), HasSubstr("injected copy fault"));
  auto residency = store_->GetResidency(id);
  ASSERT_TRUE(residency.ok());
  EXPECT_EQ(residency->tiers[0], Residency::State::kAbsent);
  EXPECT_EQ(store_->GetStats().tiers[0].used_bytes, 0u);
  EXPECT_TRUE(Holds(id, kSize, 60));
  EXPECT_NE(Touch(id, Tier::kDevice), nullptr);  // the next one succeeds
}

TEST_F(UnifiedStoreTest, NvmeHomedTensorRoundTripsThroughManagedHost) {
  Open();
  constexpr uint64_t kSize = 300 * kKiB + 7;
  const TensorId id = Make(kSize, 70, Tier::kNvme);
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());
  EXPECT_GE(LinkBytes(Link::kNvmeWrite), kSize);
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(MatchesPattern(lease->data(), kSize, 70));
  ASSERT_TRUE(lease->Release().ok());
  EXPECT_GE(LinkBytes(Link::kNvmeRead), kSize);
}

}  // namespace
}  // namespace strata
