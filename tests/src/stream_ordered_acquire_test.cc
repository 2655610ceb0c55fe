// stream_ordered_acquire_test.cc: a device acquire served from the host copy
// is stream-ordered (DESIGN; issue 14 item 6): the copy is queued on the
// copy stream and the acquire returns before it has happened; the lease's
// stream waits for it, not the CPU; the host copy stays pinned until it has
// happened; a copy that fails after the acquire returned costs no data (the
// host copy is intact) and says so at the lease's release. Forced with
// FaultyDevice's kEventWait gate, whose events stay pending while it is
// armed, as a copy still on its stream would be; the reaper thread that
// waits for them parks there.
// Runs on a GPU too (bench/gpu_check.sh sets STRATA_DEVICE=cuda).
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/faulty_device_seams.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using State = Residency::State;

constexpr uint64_t kSize = 1 << 20;

class StreamOrderedAcquireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // No prefetch: only the test's own acquires move bytes. Both tensors
    // are homed in host memory, so a device acquire loads from the host.
    StoreOptions options = ::strata::testing::SmallStoreOptions(
        dir_.path(), 2 * kSize, 8 * kSize, 16 * kSize);
    options.scheduler.prefetch = false;
    auto store =
        OpenStore(options, ::strata::testing::FaultyDeviceSeams(&device_));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    id_ = *store_->Create(
        {.name = "a", .size_bytes = kSize, .home = Tier::kHost});
    ASSERT_TRUE(store_->Write(id_, Pattern(kSize, 7).data(), kSize).ok());
  }
  void TearDown() override {
    if (device_ != nullptr) device_->gate().ReleaseAll();
  }

  State TierState(Tier tier) {
    return store_->GetResidency(id_)->tiers[static_cast<int>(tier)];
  }
  // Waits (bounded) until the reaper has seen every queued copy happen.
  bool QueuedLoadsEnd() {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (store_->GetStats().queued_loads_in_flight > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  // Arms the gate and acquires the tensor on the device: its copy is queued
  // and stays on its stream; waits until the reaper parks on its event.
  absl::StatusOr<Lease> QueuedRead() {
    device_->gate().Arm(GateOp::kEventWait);
    absl::StatusOr<Lease> lease =
        store_->Acquire(id_, Tier::kDevice, Access::kRead);
    // Returned without waiting: the reaper waits for the copy, not the caller.
    if (lease.ok()) {
      EXPECT_TRUE(device_->gate().WaitUntilHeld(GateOp::kEventWait, 1,
                                                absl::Seconds(20)));
    }
    return lease;
  }
  std::vector<std::byte> HostBytes() {
    std::vector<std::byte> out(kSize);
    EXPECT_TRUE(store_->Read(id_, out.data(), kSize).ok());
    return out;
  }

  ::strata::testing::TempDir dir_;
  FaultyDevice* device_ = nullptr;
  std::unique_ptr<Store> store_;
  TensorId id_;
};

TEST_F(StreamOrderedAcquireTest, TheAcquireReturnsBeforeItsCopyHasHappened) {
  absl::StatusOr<Lease> lease = QueuedRead();
  ASSERT_TRUE(lease.ok()) << lease.status();
  const Stats during = store_->GetStats();
  EXPECT_EQ(during.queued_loads, 1u);
  EXPECT_EQ(during.queued_loads_in_flight, 1u);
  EXPECT_EQ(TierState(Tier::kDevice), State::kClean);
  // Reads of the lease are ordered after the copy on the device.
  std::vector<std::byte> got(kSize);
  ASSERT_TRUE(lease->CopyOut(0, got.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(got.data(), kSize, 7));

  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  ASSERT_TRUE(lease->Release().ok());
  const Stats after = store_->GetStats();
  EXPECT_EQ(after.queued_loads, 1u);
  // Counted on its link once it had happened.
  EXPECT_EQ(after.links[static_cast<int>(Link::kH2D)].bytes -
                during.links[static_cast<int>(Link::kH2D)].bytes,
            kSize);
}

TEST_F(StreamOrderedAcquireTest, TheHostSourceStaysPinnedUntilTheCopyHappened) {
  absl::StatusOr<Lease> lease = QueuedRead();
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->Release().ok());
  // A host write would change the bytes the copy still reads: it waits.
  std::future<absl::StatusOr<Lease>> write = std::async(
      std::launch::async,
      [&] { return store_->Acquire(id_, Tier::kHost, Access::kWrite); });
  EXPECT_EQ(write.wait_for(std::chrono::milliseconds(100)),
            std::future_status::timeout)
      << "a host write was granted while the device copy read its bytes";
  EXPECT_EQ(store_->GetStats().queued_loads_in_flight, 1u);
  device_->gate().Release(GateOp::kEventWait);
  absl::StatusOr<Lease> granted = write.get();
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(store_->GetStats().queued_loads_in_flight, 0u);
  // The write made the device copy stale.
  EXPECT_EQ(TierState(Tier::kDevice), State::kAbsent);
  ASSERT_TRUE(granted->Release().ok());
  EXPECT_TRUE(MatchesPattern(HostBytes().data(), kSize, 7));
}

TEST_F(StreamOrderedAcquireTest, ACopyThatFailsLaterCostsNoDataAndIsReported) {
  device_->set_late_copy_faults(true);
  device_->set_spec({.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kEio});
  absl::StatusOr<Lease> lease = QueuedRead();
  ASSERT_TRUE(lease.ok()) << lease.status();  // queued: the error comes later
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  const absl::Status released = lease->Release();
  EXPECT_EQ(released.code(), FaultyDevice::InjectedCode()) << released;
  EXPECT_NE(released.message().find("after the acquire returned"),
            std::string::npos)
      << released;
  EXPECT_EQ(device_->injected(), 1u);
  // The device copy is gone; the host copy never changed.
  EXPECT_EQ(TierState(Tier::kDevice), State::kAbsent);
  EXPECT_TRUE(MatchesPattern(HostBytes().data(), kSize, 7));
  // Said once: the next acquire loads afresh, with the right bytes.
  absl::StatusOr<Lease> again =
      store_->Acquire(id_, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(again.ok()) << again.status();
  std::vector<std::byte> got(kSize);
  ASSERT_TRUE(again->CopyOut(0, got.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(got.data(), kSize, 7));
  ASSERT_TRUE(again->Release().ok());
}

TEST_F(StreamOrderedAcquireTest,
       ALateFailureAfterTheLeaseEndedGoesToTheNextAcquire) {
  device_->set_late_copy_faults(true);
  device_->set_spec({.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kEio});
  absl::StatusOr<Lease> lease = QueuedRead();
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->Release().ok());  // before the copy is known to fail
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  EXPECT_EQ(TierState(Tier::kDevice), State::kAbsent);
  const absl::StatusOr<Lease> next =
      store_->Acquire(id_, Tier::kHost, Access::kRead);
  EXPECT_EQ(next.status().code(), FaultyDevice::InjectedCode());
  // Then the tensor is usable again, its bytes whole.
  EXPECT_TRUE(MatchesPattern(HostBytes().data(), kSize, 7));
}

TEST_F(StreamOrderedAcquireTest, AFailureToQueueFailsTheAcquireAndCostsNoData) {
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  const absl::StatusOr<Lease> lease =
      store_->Acquire(id_, Tier::kDevice, Access::kRead);
  EXPECT_EQ(lease.status().code(), FaultyDevice::InjectedCode());
  EXPECT_EQ(TierState(Tier::kDevice), State::kAbsent);
  EXPECT_EQ(store_->GetStats().queued_loads, 0u);
  EXPECT_TRUE(MatchesPattern(HostBytes().data(), kSize, 7));
}

TEST_F(StreamOrderedAcquireTest, ClosingTheStoreWaitsForACopyInFlight) {
  absl::StatusOr<Lease> lease = QueuedRead();
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->Release().ok());
  std::future<void> closed =
      std::async(std::launch::async, [&] { store_.reset(); });
  EXPECT_EQ(closed.wait_for(std::chrono::milliseconds(100)),
            std::future_status::timeout)
      << "the store closed with a copy still reading its host memory";
  device_->gate().Release(GateOp::kEventWait);
  closed.get();
  device_ = nullptr;  // went with the store
}

// Without a gate the simulated device's copy has happened by the time the
// acquire returns: nothing is left in flight, nothing counted as queued.
TEST_F(StreamOrderedAcquireTest, ACopyAlreadyThereLeavesNothingInFlight) {
  absl::StatusOr<Lease> lease =
      store_->Acquire(id_, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const Stats s = store_->GetStats();
  if (s.device_backend == "simulated") {
    EXPECT_EQ(s.queued_loads, 0u);
    EXPECT_EQ(s.queued_loads_in_flight, 0u);
  }
  std::vector<std::byte> got(kSize);
  ASSERT_TRUE(lease->CopyOut(0, got.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(got.data(), kSize, 7));
  ASSERT_TRUE(lease->Release().ok());
}

}  // namespace
}  // namespace strata
