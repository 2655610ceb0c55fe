// stream_ordered_break_test.cc: adversarial tests of the stream-ordered
// device acquire (issue 14 item 6), written by a breaker pass — late copy
// failures, each a bug the first version of the feature had. A copy that
// fails after its acquire returned is told to every lease of it (their
// Release), serves no new lease and is dropped with its last lease; failed
// once all its leases had ended, it is told to the tensor's next Acquire
// (not to the store's own Read/Write, and Discard forgets it). No bytes are
// ever lost. (The interleavings that should hold:
// stream_ordered_interleaving_test.cc; many threads:
// stream_ordered_threads_test.cc; the fixture:
// tests/util/stream_ordered_break_test_util.h.)
#include <cstddef>
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

// Two device readers of a copy that failed late: both releases say so, the
// last drops the copy, and the next device acquire loads it afresh.
TEST_F(StreamOrderedBreakTest, TwoReadersOfAFailedCopyBothLearnAndItIsDropped) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  absl::StatusOr<Lease> b =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(b.ok()) << b.status();
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  const absl::Status ra = a.Release();
  const absl::Status rb = b->Release();
  EXPECT_EQ(ra.code(), FaultyDevice::InjectedCode()) << ra;
  EXPECT_EQ(rb.code(), FaultyDevice::InjectedCode())
      << "the second reader of the failed copy was told nothing: " << rb;
  EXPECT_EQ(DeviceState(), State::kAbsent)
      << "the device copy whose load failed is still valid";
  absl::StatusOr<Lease> c =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(LeaseMatches(*c, 7)) << "device acquire served the failed copy";
  ASSERT_TRUE(c->Release().ok());
  EXPECT_TRUE(ReadMatches(0, 7));
}

// A host read while the failed device lease is still held gets the host
// copy's (right) bytes; the device lease's Release says the copy failed.
TEST_F(StreamOrderedBreakTest, AHostReadBesideAFailedDeviceLeaseIsServedWhole) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  absl::StatusOr<Lease> h =
      store_->Acquire(ids_[0], Tier::kHost, Access::kRead);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(
      MatchesPattern(static_cast<const std::byte*>(h->data()), kSize, 7));
  ASSERT_TRUE(h->Release().ok());
  const absl::Status ra = a.Release();
  EXPECT_EQ(ra.code(), FaultyDevice::InjectedCode())
      << "the lease that read the undefined bytes was told OK: " << ra;
  EXPECT_EQ(DeviceState(), State::kAbsent);
  absl::StatusOr<Lease> c =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(LeaseMatches(*c, 7)) << "device acquire served the failed copy";
  ASSERT_TRUE(c->Release().ok());
}

// Then a device kWrite lease: it must load from the (intact) host copy, not
// be granted the failed device copy (which would drop the host copy).
TEST_F(StreamOrderedBreakTest, ADeviceWriteAfterAFailedCopyKeepsTheHostBytes) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  absl::StatusOr<Lease> b =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(b.ok()) << b.status();
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  a.Release().IgnoreError();  // takes the error
  b->Release().IgnoreError();
  // A read-modify-write of the tensor on the device: change nothing.
  absl::StatusOr<Lease> w =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kWrite);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(LeaseMatches(*w, 7)) << "kWrite lease sees the failed copy";
  ASSERT_TRUE(w->Release().ok());
  EXPECT_TRUE(ReadMatches(0, 7))
      << "the tensor's bytes were lost (host copy dropped for a failed copy)";
}

// Exclusive device acquires that waited for a copy that then failed.
TEST_F(StreamOrderedBreakTest, AnOverwriteThatWaitedKeepsItsBytes) {
  AWriteThatWaitedKeepsItsBytes(Access::kOverwrite);
}
TEST_F(StreamOrderedBreakTest, ADeviceWriteThatWaitedKeepsItsBytes) {
  AWriteThatWaitedKeepsItsBytes(Access::kWrite);
}

// Store::Write after a late failure whose lease had ended: it succeeds and
// says so (the report waits for the next Acquire).
TEST_F(StreamOrderedBreakTest, StoreWriteAfterALateFailureSucceeds) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  ASSERT_TRUE(a.Release().ok());
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  const absl::Status wrote =
      store_->Write(ids_[0], Pattern(kSize, 42).data(), kSize);
  absl::StatusOr<std::vector<std::byte>> got = ReadAll();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(wrote.ok()) << wrote;
  EXPECT_TRUE(MatchesPattern(got->data(), kSize, 42));
  // The report is the next Acquire's.
  const absl::StatusOr<Lease> next =
      store_->Acquire(ids_[0], Tier::kHost, Access::kRead);
  EXPECT_EQ(next.status().code(), FaultyDevice::InjectedCode());
}

// A lease of a failed copy destroyed without Release(): its destructor drops
// the error, as Lease's destructor drops any release error (use Release());
// the copy goes, and the next acquire loads whole bytes afresh.
TEST_F(StreamOrderedBreakTest, ALeaseDestroyedWithoutReleaseDropsItsError) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  {
    Lease a = QueuedDeviceRead();
    device_->gate().Release(GateOp::kEventWait);
    ASSERT_TRUE(QueuedLoadsEnd());
  }  // ~Lease
  EXPECT_EQ(DeviceState(), State::kAbsent);
  absl::StatusOr<Lease> next =
      store_->Acquire(ids_[0], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(LeaseMatches(*next, 7));
  ASSERT_TRUE(next->Release().ok());
}

// A late failure's report pending when the tensor is discarded: the
// contents it was about are gone, and so is the report.
TEST_F(StreamOrderedBreakTest, DiscardForgetsALateFailuresReport) {
  Open(2, 1);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait);
  Lease a = QueuedDeviceRead();
  ASSERT_TRUE(a.Release().ok());
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_TRUE(QueuedLoadsEnd());
  ASSERT_TRUE(store_->Discard(ids_[0]).ok());
  const absl::StatusOr<Lease> w =
      store_->Acquire(ids_[0], Tier::kHost, Access::kOverwrite);
  EXPECT_TRUE(w.ok()) << "an overwrite of discarded contents refused with: "
                      << w.status();
}

}  // namespace
}  // namespace strata
