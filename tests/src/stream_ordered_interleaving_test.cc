// stream_ordered_interleaving_test.cc: adversarial tests of the
// stream-ordered device acquire (issue 14 item 6), written by a breaker
// pass — interleavings that should hold, forced with FaultyDevice's
// kEventWait gate (the queued copy's event stays pending while armed):
// destroy, discard, evict, Store::Write, reads and closing the store while a
// copy is queued (or fails late), and the link stats of a failed copy. Every
// wait is bounded: a test that would hang fails by a timeout instead.
#include <cstddef>
#include <future>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/stream_ordered_break_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::StreamOrderedBreakTest;

TEST_F(StreamOrderedBreakTest, DestroyWaitsForTheQueuedCopy) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  EXPECT_TRUE(
      WaitsForTheQueuedCopy([&] { return store_->Destroy(ids_[0]); }).ok());
  const Stats s = store_->GetStats();
  EXPECT_EQ(s.queued_loads_in_flight, 0u);
  EXPECT_EQ(s.tensors, 0u);
}

TEST_F(StreamOrderedBreakTest, DestroyAfterALateFailure) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait, 100);
  EXPECT_TRUE(
      WaitsForTheQueuedCopy([&] { return store_->Destroy(ids_[0]); }).ok());
  EXPECT_EQ(store_->GetStats().queued_loads_in_flight, 0u);
  // Space comes back: a new tensor fits on the device.
  TensorId id = *store_->Create({.name = "n", .size_bytes = kSize});
  ASSERT_TRUE(store_->Write(id, Pattern(kSize, 5).data(), kSize).ok());
  absl::StatusOr<Lease> l = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_TRUE(LeaseMatches(*l, 5));
}

TEST_F(StreamOrderedBreakTest, DiscardWaitsForTheQueuedCopy) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  EXPECT_TRUE(
      WaitsForTheQueuedCopy([&] { return store_->Discard(ids_[0]); }).ok());
  EXPECT_EQ(DeviceState(), State::kAbsent);
  ASSERT_TRUE(store_->Write(ids_[0], Pattern(kSize, 3).data(), kSize).ok());
  EXPECT_TRUE(ReadMatches(0, 3));
}

TEST_F(StreamOrderedBreakTest, EvictWaitsForTheQueuedCopy) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  EXPECT_TRUE(WaitsForTheQueuedCopy([&] {
                return store_->Evict(ids_[0], Tier::kHost);
              }).ok());
  EXPECT_EQ(DeviceState(), State::kAbsent);
  EXPECT_EQ(store_->GetStats().queued_loads_in_flight, 0u);
  EXPECT_TRUE(ReadMatches(0, 7));
}

TEST_F(StreamOrderedBreakTest, EvictToNvmeWhileQueued) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  const absl::Status evicted = WaitsForTheQueuedCopy(
      [&] { return store_->Evict(ids_[0], Tier::kNvme); });
  // Home is host: refused, but without harm.
  EXPECT_TRUE(evicted.ok() ||
              evicted.code() == absl::StatusCode::kInvalidArgument)
      << evicted;
  EXPECT_TRUE(ReadMatches(0, 7));
}

TEST_F(StreamOrderedBreakTest, StoreWriteWaitsAndWins) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead();
  ASSERT_TRUE(a.Release().ok());
  auto w = std::async(std::launch::async, [&] {
    return store_->Write(ids_[0], Pattern(kSize, 11).data(), kSize);
  });
  EXPECT_EQ(w.wait_for(kBlocked), std::future_status::timeout)
      << "Store::Write changed host bytes a queued copy still reads";
  // A Store::Read meanwhile: the host copy is valid, readable.
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(w.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(w.get().ok());
  EXPECT_EQ(DeviceState(), State::kAbsent);
  EXPECT_TRUE(ReadMatches(0, 11));
  absl::StatusOr<Lease> d =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(LeaseMatches(*d, 11));
}

TEST_F(StreamOrderedBreakTest, ReadsWhileQueuedSeeTheRightBytes) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead();
  absl::StatusOr<Lease> b =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Lease> h =
      store_->Acquire(ids_[0], Tier::kHost, Access::kRead);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(MatchesPattern(h->data(), kSize, 7));
  EXPECT_TRUE(LeaseMatches(a, 7));
  EXPECT_TRUE(LeaseMatches(*b, 7));
  EXPECT_TRUE(ReadMatches(0, 7));  // Store::Read through the host
  // Exclusive acquires conflict with the leases: refused, not hung.
  EXPECT_EQ(
      store_->Acquire(ids_[0], Tier::kDevice, Access::kWrite).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      store_->Acquire(ids_[0], Tier::kHost, Access::kOverwrite).status().code(),
      absl::StatusCode::kFailedPrecondition);
  const Stats s = store_->GetStats();
  EXPECT_EQ(s.queued_loads, 1u);
  EXPECT_EQ(s.queued_loads_in_flight, 1u);
  ASSERT_TRUE(a.Release().ok());
  ASSERT_TRUE(b->Release().ok());
  ASSERT_TRUE(h->Release().ok());
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  EXPECT_EQ(store_->GetStats().queued_loads, 1u);
  EXPECT_EQ(DeviceState(), State::kClean);
}

TEST_F(StreamOrderedBreakTest, DeviceOverwriteAfterQueuedCopyNoFault) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead();
  ASSERT_TRUE(a.Release().ok());
  auto w = std::async(std::launch::async, [&] {
    return store_->Acquire(ids_[0], Tier::kDevice, Access::kOverwrite);
  });
  EXPECT_EQ(w.wait_for(kBlocked), std::future_status::timeout);
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(w.wait_for(kBound), std::future_status::ready);
  absl::StatusOr<Lease> lease = w.get();
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->CopyIn(0, Pattern(kSize, 55).data(), kSize).ok());
  ASSERT_TRUE(lease->Release().ok());
  EXPECT_EQ(DeviceState(), State::kDirty);
  EXPECT_TRUE(ReadMatches(0, 55));
}

// Another tensor's acquire evicts the device copy whose load is queued:
// freeing it waits for the copy (the evicting acquire parks in the event).
TEST_F(StreamOrderedBreakTest, EvictionByAnotherAcquireWaitsForTheCopy) {
  Open(1, 2);
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead(0);
  ASSERT_TRUE(a.Release().ok());
  auto b = std::async(std::launch::async, [&] {
    return store_->Acquire(ids_[1], Tier::kDevice, Access::kRead);
  });
  EXPECT_TRUE(
      device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5)))
      << "the device copy was freed without waiting for its queued load";
  EXPECT_EQ(b.wait_for(kBlocked), std::future_status::timeout);
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(b.wait_for(kBound), std::future_status::ready);
  absl::StatusOr<Lease> lb = b.get();
  ASSERT_TRUE(lb.ok()) << lb.status();
  ASSERT_TRUE(QueuedLoadsEnd());
  EXPECT_TRUE(LeaseMatches(*lb, 8));
  ASSERT_TRUE(lb->Release().ok());
  EXPECT_EQ(DeviceState(0), State::kAbsent);
  EXPECT_TRUE(ReadMatches(0, 7));
  EXPECT_TRUE(ReadMatches(1, 8));
}

// The same with a copy that fails late: the evicted copy's error still goes
// to t0's next acquire, once; t1 is unaffected.
TEST_F(StreamOrderedBreakTest, EvictionOfACopyThatFailsLate) {
  Open(1, 2);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead(0);
  ASSERT_TRUE(a.Release().ok());
  auto b = std::async(std::launch::async, [&] {
    return store_->Acquire(ids_[1], Tier::kDevice, Access::kRead);
  });
  EXPECT_TRUE(
      device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5)));
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(b.wait_for(kBound), std::future_status::ready);
  absl::StatusOr<Lease> lb = b.get();
  ASSERT_TRUE(lb.ok()) << lb.status();
  ASSERT_TRUE(QueuedLoadsEnd());
  EXPECT_TRUE(LeaseMatches(*lb, 8));
  const absl::Status rb = lb->Release();
  EXPECT_TRUE(rb.ok()) << "t1's release got t0's error: " << rb;
  EXPECT_TRUE(ReadMatches(1, 8));
  // t0's bytes intact (the error, if any, first).
  absl::StatusOr<std::vector<std::byte>> got = ReadAll(0);
  if (!got.ok()) {
    EXPECT_EQ(got.status().code(), FaultyDevice::InjectedCode());
    got = ReadAll(0);
  }
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(MatchesPattern(got->data(), kSize, 7));
}

TEST_F(StreamOrderedBreakTest, ClosingWithALeaseHeldOnAQueuedCopy) {
  Open(2, 1);
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead();
  auto closed = std::async(std::launch::async, [&] { store_.reset(); });
  EXPECT_EQ(closed.wait_for(kBlocked), std::future_status::timeout);
  FaultyDevice* device = device_;
  device->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(closed.wait_for(kBound), std::future_status::ready);
  closed.get();
  device_ = nullptr;
  const absl::Status r = a.Release();
  EXPECT_EQ(r.code(), absl::StatusCode::kFailedPrecondition) << r;
}

TEST_F(StreamOrderedBreakTest, ClosingWithALeaseHeldOnAFailingCopy) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait, 100);
  Lease a = QueuedDeviceRead();
  absl::StatusOr<Lease> h =
      store_->Acquire(ids_[0], Tier::kHost, Access::kRead);
  ASSERT_TRUE(h.ok());
  auto closed = std::async(std::launch::async, [&] { store_.reset(); });
  EXPECT_EQ(closed.wait_for(kBlocked), std::future_status::timeout);
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(closed.wait_for(kBound), std::future_status::ready);
  closed.get();
  device_ = nullptr;
  a.Release().IgnoreError();
  h->Release().IgnoreError();
}

// Lease destroyed (not released) while its copy is still queued, then the
// copy fails: the failed device copy is dropped, the next acquire is told.
TEST_F(StreamOrderedBreakTest, LeaseDroppedBeforeTheCopyFails) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  { Lease a = QueuedDeviceRead(); }
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  EXPECT_EQ(DeviceState(), State::kAbsent);
  EXPECT_EQ(
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead).status().code(),
      FaultyDevice::InjectedCode());
  absl::StatusOr<Lease> c =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(LeaseMatches(*c, 7));
}

// Stats: a failed queued copy is counted as a failed H2D, not bytes moved.
TEST_F(StreamOrderedBreakTest, LinkStatsOfAFailedQueuedCopy) {
  Open(2, 1);
  const Stats before = store_->GetStats();
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  a.Release().IgnoreError();
  const Stats after = store_->GetStats();
  const auto& lb = before.links[static_cast<int>(Link::kH2D)];
  const auto& la = after.links[static_cast<int>(Link::kH2D)];
  EXPECT_EQ(la.bytes, lb.bytes) << "a failed copy counted as moved bytes";
  EXPECT_EQ(after.queued_loads, 1u);
  EXPECT_EQ(after.queued_loads_in_flight, 0u);
}

}  // namespace
}  // namespace strata
