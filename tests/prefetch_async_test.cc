// Prefetches as jobs whose transfers run on the Mover's transfer threads:
// a gate holds a prefetch's transfer (its load, the write-back of a dirty
// victim that makes room, a unified-memory migration) in flight and the tests
// assert what the store does meanwhile — callers are not blocked, other
// prefetches complete, the queue keeps trace order — and that a failed
// transfer inside a prefetch leaves the last valid copy intact. Closing the
// store waits for a held prefetch.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/sync.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using State = Residency::State;

// Holds device copies of one direction (and unified prefetches toward the
// same side) until opened. Shared by the test and the device, so that
// opening it never races the store's destruction.
class Gate {
 public:
  // Holds H2D copies and prefetches to the device (`up`), or D2H copies and
  // prefetches to the host.
  void Close(bool up) {
    MutexLock lock(&mu_);
    closed_ = up ? 1 : 2;
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = 0;
    changed_.SignalAll();
  }
  // Returns once a call is held at the gate.
  void AwaitHeld() {
    MutexLock lock(&mu_);
    while (held_ == 0) changed_.Wait(&mu_);
  }
  void Pass(bool up) {
    MutexLock lock(&mu_);
    if (closed_ != (up ? 1 : 2)) return;
    ++held_;
    changed_.SignalAll();
    while (closed_ == (up ? 1 : 2)) changed_.Wait(&mu_);
    --held_;
  }

 private:
  Mutex mu_;
  CondVar changed_;
  int closed_ ABSL_GUARDED_BY(mu_) = 0;  // 0: open, 1: up held, 2: down held
  int held_ ABSL_GUARDED_BY(mu_) = 0;
};

// A DeviceBackend that passes every call through `gate` to `inner`.
class GatedDevice : public DeviceBackend {
 public:
  GatedDevice(std::unique_ptr<DeviceBackend> inner, std::shared_ptr<Gate> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}
  std::string name() const override { return inner_->name(); }
  bool is_simulated() const override { return inner_->is_simulated(); }
  absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) override {
    return inner_->ReserveArena(bytes);
  }
  absl::Status Copy(CopyKind kind, void* dst, const void* src, uint64_t bytes,
                    DeviceEvent* after) override {
    if (kind != CopyKind::kD2D) gate_->Pass(kind == CopyKind::kH2D);
    return inner_->Copy(kind, dst, src, bytes, after);
  }
  absl::StatusOr<std::shared_ptr<DeviceEvent>> RecordEvent(
      void* stream) override {
    return inner_->RecordEvent(stream);
  }
  absl::Status StreamWait(void* stream, DeviceEvent& event) override {
    return inner_->StreamWait(stream, event);
  }
  absl::Status RegisterHost(void* ptr, uint64_t bytes) override {
    return inner_->RegisterHost(ptr, bytes);
  }
  absl::Status UnregisterHost(void* ptr, uint64_t bytes) override {
    return inner_->UnregisterHost(ptr, bytes);
  }
  absl::StatusOr<DeviceMemInfo> GetMemInfo() override {
    return inner_->GetMemInfo();
  }
  absl::StatusOr<std::byte*> ReserveManaged(uint64_t bytes) override {
    return inner_->ReserveManaged(bytes);
  }
  absl::Status PrefetchManaged(absl::Span<const ManagedRange> ranges,
                               MemLocation to, bool discard,
                               DeviceEvent* after) override {
    gate_->Pass(to == MemLocation::kDevice);
    return inner_->PrefetchManaged(ranges, to, discard, after);
  }
  absl::Status DiscardManaged(absl::Span<const ManagedRange> ranges) override {
    return inner_->DiscardManaged(ranges);
  }
  absl::Status AdviseManaged(const ManagedRange& range,
                             ManagedAdvice advice) override {
    return inner_->AdviseManaged(range, advice);
  }
  absl::Status ServeFault(const ManagedRange& range, MemLocation to) override {
    return inner_->ServeFault(range, to);
  }
  bool batched_prefetch() const override { return inner_->batched_prefetch(); }

 private:
  const std::unique_ptr<DeviceBackend> inner_;
  const std::shared_ptr<Gate> gate_;
};

class PrefetchAsyncTest : public ::testing::Test {
 protected:
  void Open(uint64_t device_bytes, int prefetch_threads, bool unified = false) {
    StoreOptions o =
        SmallStoreOptions(dir_.path(), device_bytes, 4 * kMiB, 32 * kMiB);
    o.scheduler.prefetch_threads = prefetch_threads;
    if (unified) o.device.memory = DeviceMemory::kUnified;
    StoreSeams seams;
    seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
      auto f = std::make_unique<FaultyDevice>(std::move(d));
      faults_ = f.get();
      return std::make_unique<GatedDevice>(std::move(f), gate_);
    };
    auto s = OpenStore(o, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
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
  // Polls (bounded) until `done` holds; the prefetch threads run meanwhile.
  template <typename F>
  bool Eventually(F done) {
    for (int i = 0; i < 10000; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done();
  }
  // Acquires for reading on `tier` and checks the contents.
  void ExpectHolds(TensorId id, Tier tier, uint64_t bytes, uint64_t seed) {
    auto lease = store_->Acquire(id, tier, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(MatchesPattern(lease->data(), bytes, seed));
  }

  TempDir dir_;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  FaultyDevice* faults_ = nullptr;
  std::unique_ptr<Store> store_;
};

constexpr uint64_t kSize = 256 * 1024;

// One prefetch thread: while the first prefetch's load is held, callers
// (another Prefetch, a demand load to the host) return, and the second
// prefetch waits its turn (trace order) instead of starting beside it.
TEST_F(PrefetchAsyncTest, HeldLoadBlocksNoCallerAndKeepsOrder) {
  Open(4 * kMiB, /*prefetch_threads=*/1);
  const TensorId a = Make(kSize, 1), b = Make(kSize, 2), c = Make(kSize, 3);
  gate_->Close(/*up=*/true);
  ASSERT_TRUE(store_->Prefetch(a, Tier::kDevice).ok());
  gate_->AwaitHeld();
  EXPECT_EQ(On(a, Tier::kDevice), State::kLoading);
  ASSERT_TRUE(store_->Prefetch(b, Tier::kDevice).ok());
  ExpectHolds(c, Tier::kHost, kSize, 3);  // NVMe -> host: not gated
  EXPECT_EQ(On(b, Tier::kDevice), State::kAbsent) << "b started beside a";
  gate_->Open();
  ExpectHolds(a, Tier::kDevice, kSize, 1);
  ASSERT_TRUE(
      Eventually([&] { return On(b, Tier::kDevice) == State::kClean; }));
  ExpectHolds(b, Tier::kDevice, kSize, 2);
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
  gate_->Close(/*up=*/false);
  ASSERT_TRUE(store_->Prefetch(p, Tier::kDevice).ok());
  gate_->AwaitHeld();
  EXPECT_EQ(On(d, Tier::kDevice), State::kEvicting);
  EXPECT_EQ(On(p, Tier::kDevice), State::kLoading);
  ASSERT_TRUE(store_->Prefetch(q, Tier::kHost).ok());
  EXPECT_TRUE(Eventually([&] { return On(q, Tier::kHost) == State::kClean; }))
      << "a held write-back stopped another prefetch";
  EXPECT_EQ(On(d, Tier::kDevice), State::kEvicting);
  gate_->Open();
  ExpectHolds(p, Tier::kDevice, kMiB, 2);
  EXPECT_EQ(On(d, Tier::kDevice), State::kAbsent);
  ExpectHolds(d, Tier::kHost, kMiB, 1);
  EXPECT_GE(store_->GetStats().write_backs, 1u);
}

// A prefetch that finds the tier full of a load in flight parks, its copy
// loading, until that load ends, then looks again: here the loaded copy is
// leased by then, so the prefetch gives up without counting a failure.
TEST_F(PrefetchAsyncTest, PrefetchParksWhileALoadInFlightHoldsTheRoom) {
  Open(kMiB, /*prefetch_threads=*/1);
  const TensorId r = Make(kMiB, 1), p = Make(kMiB, 2);
  gate_->Close(/*up=*/true);
  std::optional<Lease> held;
  std::thread reader([&] {
    auto lease = store_->Acquire(r, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    held = std::move(*lease);
  });
  gate_->AwaitHeld();
  ASSERT_TRUE(store_->Prefetch(p, Tier::kDevice).ok());
  EXPECT_TRUE(
      Eventually([&] { return On(p, Tier::kDevice) == State::kLoading; }));
  gate_->Open();
  reader.join();
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(
      Eventually([&] { return On(p, Tier::kDevice) == State::kAbsent; }));
  EXPECT_EQ(store_->GetStats().prefetch.failed, 0u);
  EXPECT_EQ(On(r, Tier::kDevice), State::kClean);
  ASSERT_TRUE(held->Release().ok());
  ExpectHolds(p, Tier::kDevice, kMiB, 2);
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
      Eventually([&] { return store_->GetStats().prefetch.failed == 1; }));
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
      Eventually([&] { return store_->GetStats().prefetch.failed == 1; }));
  EXPECT_EQ(On(a, Tier::kDevice), State::kAbsent);
  EXPECT_EQ(On(a, Tier::kNvme), State::kClean);
  faults_->set_spec({});
  ExpectHolds(a, Tier::kDevice, kSize, 1);
}

// Closing the store while a prefetch's load is held waits for it, then
// finishes cleanly.
TEST_F(PrefetchAsyncTest, CloseWaitsForAHeldPrefetch) {
  Open(4 * kMiB, /*prefetch_threads=*/2);
  std::vector<TensorId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Make(kSize, i));
  gate_->Close(/*up=*/true);
  for (TensorId id : ids) ASSERT_TRUE(store_->Prefetch(id, Tier::kDevice).ok());
  gate_->AwaitHeld();
  std::thread closer([this] { store_.reset(); });
  gate_->Open();
  closer.join();
  EXPECT_EQ(store_, nullptr);
}

// Unified memory, NVMe home: the prefetch loads the host copy, then migrates
// its pages; while the migration is held the host copy is valid.
TEST_F(PrefetchAsyncTest, UnifiedPrefetchLoadsHostThenMigrates) {
  Open(kMiB, /*prefetch_threads=*/1, /*unified=*/true);
  const TensorId z = Make(kSize, 4);
  ASSERT_EQ(On(z, Tier::kHost), State::kAbsent);
  gate_->Close(/*up=*/true);
  ASSERT_TRUE(store_->Prefetch(z, Tier::kDevice).ok());
  gate_->AwaitHeld();
  EXPECT_EQ(On(z, Tier::kHost), State::kClean);
  EXPECT_EQ(On(z, Tier::kDevice), State::kLoading);
  gate_->Open();
  ExpectHolds(z, Tier::kDevice, kSize, 4);
  EXPECT_EQ(store_->GetStats().unified.prefetches, 1u);
}

// Unified memory: room for a prefetch ends another tensor's residency by a
// migration to the host, held here; then the prefetch migrates its own.
TEST_F(PrefetchAsyncTest, UnifiedPrefetchEvictsByMigratingBack) {
  Open(kMiB, /*prefetch_threads=*/1, /*unified=*/true);
  const TensorId x = Make(kMiB, 1, Tier::kHost);
  const TensorId y = Make(kMiB, 2, Tier::kHost);
  ExpectHolds(x, Tier::kDevice, kMiB, 1);
  gate_->Close(/*up=*/false);
  ASSERT_TRUE(store_->Prefetch(y, Tier::kDevice).ok());
  gate_->AwaitHeld();
  EXPECT_EQ(On(x, Tier::kDevice), State::kEvicting);
  EXPECT_EQ(On(y, Tier::kDevice), State::kLoading);
  gate_->Open();
  ExpectHolds(y, Tier::kDevice, kMiB, 2);
  EXPECT_EQ(On(x, Tier::kDevice), State::kAbsent);
  ExpectHolds(x, Tier::kHost, kMiB, 1);
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
      Eventually([&] { return store_->GetStats().prefetch.failed == 1; }));
  EXPECT_EQ(On(z, Tier::kDevice), State::kAbsent);
  faults_->set_spec({});
  ExpectHolds(z, Tier::kDevice, kSize, 5);
  ASSERT_TRUE(store_->Destroy(z).ok());
  const Stats st = store_->GetStats();
  EXPECT_EQ(st.tiers[0].used_bytes, 0u);
  EXPECT_EQ(st.tiers[1].used_bytes, 0u);
}

}  // namespace
}  // namespace strata
