// Prefetches as jobs whose transfers run on the Mover's transfer threads:
// the FaultyDevice's gate (tiers/fault/gate.h) holds a prefetch's transfer
// (its load, the write-back of a dirty victim that makes room, a
// unified-memory migration) in flight and the tests assert what the store
// does meanwhile — callers are not blocked, other prefetches complete, the
// queue keeps trace order — and that the transfer was held; and that a failed
// transfer inside a prefetch leaves the last valid copy intact. Closing the
// store waits for a held prefetch. Nothing sleeps: a state the store shows
// but signals to nobody is polled with WaitUntil (tests/util/race_test_util.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/race_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"
#include "tiers/fault/gate.h"

namespace strata {
namespace {

using ::strata::testing::AcquiresObserved;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using ::strata::testing::WaitUntil;
using State = Residency::State;

// The store's FaultyDevice, whose destruction first waits for `*may_go`.
// A test that lets a held transfer go while another thread closes the store
// clears it until its Release() has returned: under ThreadSanitizer,
// base/sync.h's Mutex touches itself after unlocking (it wakes Await()ers),
// and by then the released transfer may have ended and the store destroyed
// the gate.
class TestDevice final : public FaultyDevice {
 public:
  TestDevice(std::unique_ptr<DeviceBackend> inner,
             const std::atomic<bool>* may_go)
      : FaultyDevice(std::move(inner)), may_go_(may_go) {}
  ~TestDevice() override { may_go_->wait(false); }

 private:
  const std::atomic<bool>* const may_go_;
};

class PrefetchAsyncTest : public ::testing::Test {
 protected:
  // A test that fails with a transfer still held lets it go here, or
  // closing the store would wait for it forever.
  ~PrefetchAsyncTest() override {
    if (store_ != nullptr) gate().ReleaseAll();
  }

  // `predicted`: the scheduler prefetches what its trace predicts; false
  // leaves only the test's own Prefetch calls (the trace still orders
  // eviction).
  void Open(uint64_t device_bytes, int prefetch_threads, bool unified = false,
            bool predicted = true) {
    StoreOptions o =
        SmallStoreOptions(dir_.path(), device_bytes, 4 * kMiB, 32 * kMiB);
    o.scheduler.prefetch_threads = prefetch_threads;
    o.scheduler.prefetch = predicted;
    if (unified) o.device.memory = DeviceMemory::kUnified;
    StoreSeams seams;
    seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
      auto f = std::make_unique<TestDevice>(std::move(d), &device_may_go_);
      faults_ = f.get();
      return f;
    };
    auto s = OpenStore(o, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  // Where the device's transfers are held; alive as long as store_.
  Gate& gate() { return faults_->gate(); }
  // A tensor with Pattern(bytes, seed), on NVMe only (home NVMe) or on its
  // host home.
  TensorId Make(uint64_t bytes, uint64_t seed, Tier home = Tier::kNvme) {
    auto id = store_->Create({.name = "t", .size_bytes = bytes, .home = home});
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(store_->Write(*id, Pattern(bytes, seed).data(), bytes).ok());
    if (home == Tier::kNvme) {
      EXPECT_TRUE(store_->Evict(*id, Tier::kNvme).ok());
    }
    return *id;
  }
  // A tensor whose only copy is a dirty device copy (home NVMe).
  TensorId MakeDirtyOnDevice(uint64_t bytes, uint64_t seed) {
    auto id = store_->Create({.name = "dirty", .size_bytes = bytes});
    EXPECT_TRUE(id.ok()) << id.status();
    auto lease = store_->Acquire(*id, Tier::kDevice, Access::kOverwrite);
    EXPECT_TRUE(lease.ok()) << lease.status();
    std::vector<std::byte> p = Pattern(bytes, seed);
    std::memcpy(lease->data(), p.data(), bytes);
    EXPECT_TRUE(lease->Release().ok());
    EXPECT_EQ(On(*id, Tier::kDevice), State::kDirty);
    return *id;
  }
  State On(TensorId id, Tier tier) {
    return store_->GetResidency(id)->tiers[static_cast<int>(tier)];
  }
  // Acquires for reading on `tier` and checks the contents.
  void ExpectHolds(TensorId id, Tier tier, uint64_t bytes, uint64_t seed) {
    auto lease = store_->Acquire(id, tier, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(MatchesPattern(lease->data(), bytes, seed));
  }

  TempDir dir_;
  // The store's device may be destroyed (see TestDevice).
  std::atomic<bool> device_may_go_{true};
  FaultyDevice* faults_ = nullptr;  // owned by store_
  std::unique_ptr<Store> store_;
};

constexpr uint64_t kSize = 256 * 1024;

// One prefetch thread: while the first prefetch's load is held, callers
// (another Prefetch, a demand load to the host) return, and the second
// prefetch waits its turn (trace order) instead of starting beside it: a
// job that starts marks its copy loading before Prefetch returns, so b is
// still absent.
TEST_F(PrefetchAsyncTest, HeldLoadBlocksNoCallerAndKeepsOrder) {
  Open(4 * kMiB, /*prefetch_threads=*/1);
  const TensorId a = Make(kSize, 1), b = Make(kSize, 2), c = Make(kSize, 3);
  gate().Arm(GateOp::kH2D);  // a's load
  ASSERT_TRUE(store_->Prefetch(a, Tier::kDevice).ok());
  ASSERT_TRUE(gate().WaitUntilHeld(GateOp::kH2D));
  EXPECT_EQ(On(a, Tier::kDevice), State::kLoading);
  ASSERT_TRUE(store_->Prefetch(b, Tier::kDevice).ok());
  ExpectHolds(c, Tier::kHost, kSize, 3);  // NVMe -> host: no device copy
  EXPECT_EQ(On(b, Tier::kDevice), State::kAbsent) << "b started beside a";
  EXPECT_EQ(gate().parked(GateOp::kH2D), 1) << "a's load was let go early";
  gate().Release(GateOp::kH2D);
  ExpectHolds(a, Tier::kDevice, kSize, 1);
  ASSERT_TRUE(WaitUntil([&] { return On(b, Tier::kDevice) == State::kClean; }));
  ExpectHolds(b, Tier::kDevice, kSize, 2);
  EXPECT_EQ(gate().held(GateOp::kH2D), 1u);
  const PrefetchStats s = store_->GetStats().prefetch;
  EXPECT_EQ(s.issued, 2u);
  EXPECT_EQ(s.hit + s.late, 2u);
  EXPECT_EQ(s.failed, 0u);
}

// Making room for a prefetch writes a dirty victim back; while that
// write-back is held, another prefetch (a second job) completes, and the
// victim is evicting, not lost.
TEST_F(PrefetchAsyncTest, WriteBackForRoomRunsWhileOtherPrefetchesComplete) {
  Open(kMiB, /*prefetch_threads=*/2);
  const TensorId d = MakeDirtyOnDevice(kMiB, 1);
  const TensorId p = Make(kMiB, 2), q = Make(kSize, 3);
  gate().Arm(GateOp::kD2H);  // d's write-back
  ASSERT_TRUE(store_->Prefetch(p, Tier::kDevice).ok());
  ASSERT_TRUE(gate().WaitUntilHeld(GateOp::kD2H));
  EXPECT_EQ(On(d, Tier::kDevice), State::kEvicting);
  EXPECT_EQ(On(p, Tier::kDevice), State::kLoading);
  ASSERT_TRUE(store_->Prefetch(q, Tier::kHost).ok());
  EXPECT_TRUE(WaitUntil([&] { return On(q, Tier::kHost) == State::kClean; }))
      << "a held write-back stopped another prefetch";
  EXPECT_EQ(On(d, Tier::kDevice), State::kEvicting);
  EXPECT_EQ(gate().parked(GateOp::kD2H), 1) << "the write-back was let go";
  gate().Release(GateOp::kD2H);
  ExpectHolds(p, Tier::kDevice, kMiB, 2);
  EXPECT_EQ(On(d, Tier::kDevice), State::kAbsent);
  ExpectHolds(d, Tier::kHost, kMiB, 1);
  EXPECT_EQ(gate().held(GateOp::kD2H), 1u);
  EXPECT_GE(store_->GetStats().write_backs, 1u);
}

// A prefetch that finds the tier full of a load in flight parks, its copy
// loading, until that load ends, then looks again: here the loaded copy is
// leased by then, so the prefetch gives up without counting a failure.
TEST_F(PrefetchAsyncTest, PrefetchParksWhileALoadInFlightHoldsTheRoom) {
  Open(kMiB, /*prefetch_threads=*/1);
  const TensorId r = Make(kMiB, 1), p = Make(kMiB, 2);
  gate().Arm(GateOp::kH2D);  // the reader's load of r
  std::optional<Lease> held;
  std::thread reader([&] {
    auto lease = store_->Acquire(r, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    held = std::move(*lease);
  });
  // Until the reader is joined, failures are EXPECTs: the test must reach
  // the release and the join.
  EXPECT_TRUE(gate().WaitUntilHeld(GateOp::kH2D));
  EXPECT_TRUE(store_->Prefetch(p, Tier::kDevice).ok());
  EXPECT_TRUE(
      WaitUntil([&] { return On(p, Tier::kDevice) == State::kLoading; }));
  EXPECT_EQ(gate().parked(GateOp::kH2D), 1) << "r's load was let go early";
  gate().Release(GateOp::kH2D);
  reader.join();
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(
      WaitUntil([&] { return On(p, Tier::kDevice) == State::kAbsent; }));
  EXPECT_EQ(store_->GetStats().prefetch.failed, 0u);
  EXPECT_EQ(On(r, Tier::kDevice), State::kClean);
  ASSERT_TRUE(held->Release().ok());
  ExpectHolds(p, Tier::kDevice, kMiB, 2);
  EXPECT_EQ(gate().held(GateOp::kH2D), 1u);
}

// The write-back a prefetch starts fails: the prefetch fails, the dirty copy
// stays valid with its contents, and a later demand load succeeds.
TEST_F(PrefetchAsyncTest, FailedWriteBackInAPrefetchKeepsTheDirtyCopy) {
  Open(kMiB, /*prefetch_threads=*/1);
  const TensorId d = MakeDirtyOnDevice(kMiB, 1);
  const TensorId p = Make(kMiB, 2);
  faults_->set_spec(
      {.nth = 1, .ops = FaultOps::kD2H, .kind = FaultKind::kTornCopy});
  ASSERT_TRUE(store_->Prefetch(p, Tier::kDevice).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return store_->GetStats().prefetch.failed == 1; }));
  EXPECT_EQ(faults_->injected(), 1u);
  EXPECT_EQ(On(d, Tier::kDevice), State::kDirty);
  EXPECT_EQ(On(p, Tier::kDevice), State::kAbsent);
  ExpectHolds(d, Tier::kDevice, kMiB, 1);
  faults_->set_spec({});
  ExpectHolds(p, Tier::kDevice, kMiB, 2);
  ExpectHolds(d, Tier::kHost, kMiB, 1);
}

// A prefetch's load fails: the copy is absent again, the NVMe copy intact.
TEST_F(PrefetchAsyncTest, FailedLoadLeavesTheSourceIntact) {
  Open(4 * kMiB, /*prefetch_threads=*/1);
  const TensorId a = Make(kSize, 1);
  faults_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  ASSERT_TRUE(store_->Prefetch(a, Tier::kDevice).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return store_->GetStats().prefetch.failed == 1; }));
  EXPECT_EQ(On(a, Tier::kDevice), State::kAbsent);
  EXPECT_EQ(On(a, Tier::kNvme), State::kClean);
  faults_->set_spec({});
  ExpectHolds(a, Tier::kDevice, kSize, 1);
}

// Closing the store while two prefetches' loads are held (two prefetch
// threads, two more prefetches queued) waits for them, then finishes
// cleanly. That the close reached its wait while the loads were held shows
// through an acquire waiting on one of them: the close wakes it and it
// fails (the store is closed) while the close itself has not returned; only
// then are the loads let go. The acquire was observed inside the store
// before the close began, and it returns before the close can go on. The
// store's device outlives this thread's last use of its gate (TestDevice).
TEST_F(PrefetchAsyncTest, CloseWaitsForAHeldPrefetch) {
  Open(4 * kMiB, /*prefetch_threads=*/2);
  std::vector<TensorId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Make(kSize, i));
  Gate& gate = faults_->gate();  // destroyed with the store: not used after
  gate.Arm(GateOp::kH2D, 2);     // the loads of the two jobs that start
  for (TensorId id : ids) ASSERT_TRUE(store_->Prefetch(id, Tier::kDevice).ok());
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kH2D, 2));
  EXPECT_EQ(On(ids[0], Tier::kDevice), State::kLoading);
  EXPECT_EQ(On(ids[1], Tier::kDevice), State::kLoading);
  Store* const store = store_.get();
  const uint64_t observed = AcquiresObserved(*store);
  absl::Status waited;
  std::atomic<bool> waiter_done{false}, closed{false};
  std::thread waiter([&] {
    waited = store->Acquire(ids[0], Tier::kDevice, Access::kRead).status();
    waiter_done = true;
  });
  // Until both threads are joined, failures are EXPECTs: the test must
  // reach the release and the joins.
  EXPECT_TRUE(WaitUntil([&] { return AcquiresObserved(*store) > observed; }));
  device_may_go_ = false;  // until this thread is done with the gate
  std::thread closer([&] {
    store_.reset();
    closed = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return waiter_done.load(); }))
      << "the close never woke an acquire waiting on a held load";
  EXPECT_EQ(waited.code(), absl::StatusCode::kFailedPrecondition) << waited;
  EXPECT_FALSE(closed) << "the close did not wait for the held prefetches";
  EXPECT_EQ(gate.parked(GateOp::kH2D), 2) << "a held load was let go early";
  gate.Release(GateOp::kH2D);
  device_may_go_ = true;
  device_may_go_.notify_all();
  waiter.join();
  closer.join();
  EXPECT_TRUE(closed);
  EXPECT_EQ(store_, nullptr);
}

// Unified memory, NVMe home: the prefetch loads the host copy, then migrates
// its pages; while the migration is held the host copy is valid.
TEST_F(PrefetchAsyncTest, UnifiedPrefetchLoadsHostThenMigrates) {
  Open(kMiB, /*prefetch_threads=*/1, /*unified=*/true);
  const TensorId z = Make(kSize, 4);
  ASSERT_EQ(On(z, Tier::kHost), State::kAbsent);
  gate().Arm(GateOp::kPrefetchToDevice);  // the migration
  ASSERT_TRUE(store_->Prefetch(z, Tier::kDevice).ok());
  ASSERT_TRUE(gate().WaitUntilHeld(GateOp::kPrefetchToDevice));
  EXPECT_EQ(On(z, Tier::kHost), State::kClean);
  EXPECT_EQ(On(z, Tier::kDevice), State::kLoading);
  gate().Release(GateOp::kPrefetchToDevice);
  ExpectHolds(z, Tier::kDevice, kSize, 4);
  EXPECT_EQ(gate().held(GateOp::kPrefetchToDevice), 1u);
  EXPECT_EQ(store_->GetStats().unified.prefetches, 1u);
}

// Unified memory: room for a prefetch ends another tensor's residency by a
// migration to the host, held here; then the prefetch migrates its own.
TEST_F(PrefetchAsyncTest, UnifiedPrefetchEvictsByMigratingBack) {
  Open(kMiB, /*prefetch_threads=*/1, /*unified=*/true);
  const TensorId x = Make(kMiB, 1, Tier::kHost);
  const TensorId y = Make(kMiB, 2, Tier::kHost);
  ExpectHolds(x, Tier::kDevice, kMiB, 1);
  gate().Arm(GateOp::kPrefetchToHost);  // x's eviction
  ASSERT_TRUE(store_->Prefetch(y, Tier::kDevice).ok());
  ASSERT_TRUE(gate().WaitUntilHeld(GateOp::kPrefetchToHost));
  EXPECT_EQ(On(x, Tier::kDevice), State::kEvicting);
  EXPECT_EQ(On(y, Tier::kDevice), State::kLoading);
  gate().Release(GateOp::kPrefetchToHost);
  ExpectHolds(y, Tier::kDevice, kMiB, 2);
  EXPECT_EQ(On(x, Tier::kDevice), State::kAbsent);
  ExpectHolds(x, Tier::kHost, kMiB, 1);
  EXPECT_EQ(gate().held(GateOp::kPrefetchToHost), 1u);
  const UnifiedStats u = store_->GetStats().unified;
  EXPECT_EQ(u.evictions, 1u);
  EXPECT_GE(u.prefetches, 2u);
}

// Unified memory: a failed migration fails the prefetch and loses nothing.
TEST_F(PrefetchAsyncTest, UnifiedFailedMigrationLosesNothing) {
  Open(kMiB, /*prefetch_threads=*/1, /*unified=*/true);
  const TensorId z = Make(kSize, 5);
  faults_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  ASSERT_TRUE(store_->Prefetch(z, Tier::kDevice).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return store_->GetStats().prefetch.failed == 1; }));
  EXPECT_EQ(On(z, Tier::kDevice), State::kAbsent);
  faults_->set_spec({});
  ExpectHolds(z, Tier::kDevice, kSize, 5);
  ASSERT_TRUE(store_->Destroy(z).ok());
  const Stats st = store_->GetStats();
  EXPECT_EQ(st.tiers[0].used_bytes, 0u);
  EXPECT_EQ(st.tiers[1].used_bytes, 0u);
}

// A prefetched copy an acquire is waiting for stays until that acquire
// takes it. Step A B C, learned, on a device with room for two (Belady
// keeps A and C; C is then evicted by hand): in step 3, A is a hit and B's
// prefetch (held at the gate) is in flight when B's acquire comes and waits
// for it. The acquire has been observed, so B's next use looks a step away,
// the furthest of the copies there. C's prefetch, queued behind B's (one
// prefetch thread), starts the moment B's load ends, in the same hold of the
// store's lock, and needs room: it must evict A, not the copy the acquire is
// about to take (which would drop a finished load and make the acquire load
// B again). The prefetches are the test's own, so that none the trace plans
// races the setup.
TEST_F(PrefetchAsyncTest, ACopyAnAcquireWaitsForIsNotEvicted) {
  Open(2 * kMiB, /*prefetch_threads=*/1, /*unified=*/false,
       /*predicted=*/false);
  const TensorId a = Make(kMiB, 1, Tier::kHost), b = Make(kMiB, 2, Tier::kHost),
                 c = Make(kMiB, 3, Tier::kHost);
  for (int step = 0; step < 2; ++step) {  // the first records the trace
    store_->BeginStep();
    ExpectHolds(a, Tier::kDevice, kMiB, 1);
    ExpectHolds(b, Tier::kDevice, kMiB, 2);
    ExpectHolds(c, Tier::kDevice, kMiB, 3);
    store_->EndStep();
  }
  ASSERT_EQ(On(a, Tier::kDevice), State::kClean);
  ASSERT_EQ(On(b, Tier::kDevice), State::kAbsent);
  ASSERT_TRUE(store_->Evict(c, Tier::kHost).ok());
  ASSERT_EQ(On(c, Tier::kDevice), State::kAbsent);
  const int h2d = static_cast<int>(Link::kH2D);
  const uint64_t h2d_before = store_->GetStats().links[h2d].bytes;
  store_->BeginStep();
  ExpectHolds(a, Tier::kDevice, kMiB, 1);
  gate().Arm(GateOp::kH2D);
  ASSERT_TRUE(store_->Prefetch(b, Tier::kDevice).ok());
  ASSERT_TRUE(gate().WaitUntilHeld(GateOp::kH2D));
  ASSERT_EQ(On(b, Tier::kDevice), State::kLoading);
  Store* const store = store_.get();
  const uint64_t observed = AcquiresObserved(*store);
  bool b_ok = false;
  std::thread reader([&] {
    auto lease = store->Acquire(b, Tier::kDevice, Access::kRead);
    b_ok = lease.ok() && MatchesPattern(lease->data(), kMiB, 2);
  });
  // Until the reader is joined, failures are EXPECTs.
  EXPECT_TRUE(WaitUntil([&] { return AcquiresObserved(*store) > observed; }));
  EXPECT_TRUE(store_->Prefetch(c, Tier::kDevice).ok());  // behind B's
  gate().Release(GateOp::kH2D);
  reader.join();
  EXPECT_TRUE(b_ok);
  ASSERT_TRUE(WaitUntil([&] { return On(c, Tier::kDevice) == State::kClean; }));
  EXPECT_EQ(store_->GetStats().links[h2d].bytes - h2d_before, 2 * kMiB)
      << "B was loaded twice: its finished load was dropped before the "
         "acquire waiting for it took it";
  EXPECT_EQ(On(a, Tier::kDevice), State::kAbsent) << "C's room came from A";
  ExpectHolds(c, Tier::kDevice, kMiB, 3);
  store_->EndStep();
}

}  // namespace
}  // namespace strata
