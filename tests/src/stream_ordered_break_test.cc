// stream_ordered_break_test.cc: adversarial tests of the stream-ordered
// device acquire (issue 14 item 6), written by a breaker pass: interleavings
// forced with FaultyDevice's kEventWait gate (the queued copy's event stays
// pending while armed) and its late copy faults. Every wait is bounded: a
// test that would hang fails by a timeout instead. A copy that fails after
// its acquire returned is told to every lease of it (their Release), serves
// no new lease and is dropped with its last lease; failed once all its
// leases had ended, it is told to the tensor's next Acquire (not to the
// store's own Read/Write, and Discard forgets it). No bytes are ever lost.
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
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
constexpr auto kBound = std::chrono::seconds(20);
constexpr auto kBlocked = std::chrono::milliseconds(200);

class StreamOrderedBreakTest : public ::testing::Test {
 protected:
  void Open(uint64_t device_tensors, int tensors, bool prefetch = false) {
    StoreOptions options = ::strata::testing::SmallStoreOptions(
        dir_.path(), device_tensors * kSize, 16 * kSize, 32 * kSize);
    options.scheduler.prefetch = prefetch;
    auto store =
        OpenStore(options, ::strata::testing::FaultyDeviceSeams(&device_));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    for (int i = 0; i < tensors; ++i) {
      ids_.push_back(*store_->Create({.name = "t" + std::to_string(i),
                                      .size_bytes = kSize,
                                      .home = Tier::kHost}));
      ASSERT_TRUE(
          store_->Write(ids_[i], Pattern(kSize, 7 + i).data(), kSize).ok());
    }
  }
  void SetUp() override {}
  void TearDown() override {
    if (device_ != nullptr) device_->gate().ReleaseAll();
  }
  void LateFaultNextH2D() {
    device_->set_late_copy_faults(true);
    device_->set_spec(
        {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kEio});
  }
  State DeviceState(int i = 0) {
    return store_->GetResidency(ids_[i])
        ->tiers[static_cast<int>(Tier::kDevice)];
  }
  State HostState(int i = 0) {
    return store_->GetResidency(ids_[i])->tiers[static_cast<int>(Tier::kHost)];
  }
  bool QueuedLoadsEnd() {
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (store_->GetStats().queued_loads_in_flight > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  // Store::Read of tensor i, bounded (a broken store could wait forever).
  absl::StatusOr<std::vector<std::byte>> ReadAll(int i = 0) {
    auto f = std::async(
        std::launch::async, [&]() -> absl::StatusOr<std::vector<std::byte>> {
          std::vector<std::byte> out(kSize);
          absl::Status s = store_->Read(ids_[i], out.data(), kSize);
          if (!s.ok()) return s;
          return out;
        });
    if (f.wait_for(kBound) != std::future_status::ready) {
      ADD_FAILURE() << "Store::Read hung";
      device_->gate().ReleaseAll();
      f.wait();
    }
    return f.get();
  }
  bool ReadMatches(int i, uint64_t seed) {
    absl::StatusOr<std::vector<std::byte>> got = ReadAll(i);
    if (!got.ok()) {
      ADD_FAILURE() << "Read of t" << i << ": " << got.status();
      return false;
    }
    return MatchesPattern(got->data(), kSize, seed);
  }
  bool LeaseMatches(const Lease& lease, uint64_t seed) {
    std::vector<std::byte> got(kSize);
    absl::Status s = lease.CopyOut(0, got.data(), kSize);
    if (!s.ok()) {
      ADD_FAILURE() << s;
      return false;
    }
    return MatchesPattern(got.data(), kSize, seed);
  }
  // Acquire(device, read) of t0, and waits for the reaper to park on its
  // copy's event (held by the gate).
  Lease QueuedDeviceRead(int i = 0) {
    absl::StatusOr<Lease> lease =
        store_->Acquire(ids_[i], Tier::kDevice, Access::kRead);
    EXPECT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(device_->gate().WaitUntilHeld(GateOp::kEventWait, 1,
                                              absl::Seconds(20)));
    EXPECT_EQ(store_->GetStats().queued_loads_in_flight, 1u);
    return lease.ok() ? *std::move(lease) : Lease();
  }

  // A late-failing copy of a released device lease held in flight; an
  // exclusive device acquire (`access`) waits for it, is granted after the
  // failed copy was dropped, and the caller writes pattern 99 through it. Its
  // Release must not take the old error nor drop its device copy (by then
  // the only one).
  void AWriteThatWaitedKeepsItsBytes(Access access) {
    Open(2, 1);
    LateFaultNextH2D();
    device_->gate().Arm(GateOp::kEventWait);
    absl::StatusOr<Lease> lease = absl::UnknownError("not granted");
    ASSERT_TRUE(WaitsForTheQueuedCopy([&] {
                  lease = store_->Acquire(ids_[0], Tier::kDevice, access);
                  return lease.status();
                }).ok())
        << lease.status();
    if (access == Access::kWrite) {
      EXPECT_TRUE(LeaseMatches(*lease, 7));
    }
    ASSERT_TRUE(lease->CopyIn(0, Pattern(kSize, 99).data(), kSize).ok());
    const absl::Status released = lease->Release();
    EXPECT_TRUE(released.ok()) << released;
    EXPECT_NE(DeviceState(), State::kAbsent);
    absl::StatusOr<std::vector<std::byte>> got = ReadAll();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesPattern(got->data(), kSize, 99)) << "the write was lost";
  }

  // With the copy of a released device lease of t0 held in flight (queued
  // by QueuedDeviceRead), runs `op` on another thread: it must still wait
  // when checked, and end once the gate lets the copy happen. Returns what
  // `op` returned.
  template <typename Op>
  absl::Status WaitsForTheQueuedCopy(Op op) {
    Lease a = QueuedDeviceRead();
    EXPECT_TRUE(a.Release().ok());
    auto done = std::async(std::launch::async, std::move(op));
    EXPECT_EQ(done.wait_for(kBlocked), std::future_status::timeout)
        << "it did not wait for the copy reading the host copy";
    device_->gate().Release(GateOp::kEventWait);
    if (done.wait_for(kBound) != std::future_status::ready) {
      return absl::DeadlineExceededError("never ended");
    }
    return done.get();
  }

  ::strata::testing::TempDir dir_;
  FaultyDevice* device_ = nullptr;
  std::unique_ptr<Store> store_;
  std::vector<TensorId> ids_;
};

// ---------------------------------------------------------------------------
// Late copy failures (each was a bug the first version of the feature had).

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

// ---------------------------------------------------------------------------
// Interleavings that should hold.

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

// Many threads acquire and release device and host leases of several
// tensors while every queued copy's event is held (and the device is too
// small for all of them, so evictions park in the events too).
TEST_F(StreamOrderedBreakTest, ManyThreadsWhileCopiesAreHeld) {
  constexpr int kTensors = 4;
  Open(2, kTensors);
  device_->gate().Arm(GateOp::kEventWait, 100000);
  std::atomic<int> bad{0}, errors{0}, done{0};
  std::vector<std::thread> threads;
  std::mutex err_mu;
  std::string first_error;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int k = (t + i) % kTensors;
        const Tier tier = (i % 3 == 2) ? Tier::kHost : Tier::kDevice;
        absl::StatusOr<Lease> l = store_->Acquire(ids_[k], tier, Access::kRead);
        if (!l.ok()) {
          // Every device slot leased by the other threads: a fair refusal.
          if (l.status().code() == absl::StatusCode::kResourceExhausted) {
            continue;
          }
          ++errors;
          std::lock_guard<std::mutex> g(err_mu);
          if (first_error.empty()) first_error = l.status().ToString();
          continue;
        }
        std::vector<std::byte> got(kSize);
        if (!l->CopyOut(0, got.data(), kSize).ok() ||
            !MatchesPattern(got.data(), kSize, 7 + k)) {
          ++bad;
        }
        if (!l->Release().ok()) ++errors;
      }
      ++done;
    });
  }
  // Let them run into the held events, then open the gate.
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5));
  device_->gate().Release(GateOp::kEventWait);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (done.load() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(done.load(), 6) << "threads hung";
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(errors.load(), 0) << first_error;
  ASSERT_TRUE(QueuedLoadsEnd());
  std::cout << "queued_loads=" << store_->GetStats().queued_loads
            << " reader_waits=" << store_->GetStats().device_reader_waits
            << "\n";
  for (int k = 0; k < kTensors; ++k) EXPECT_TRUE(ReadMatches(k, 7 + k));
}

// The same with writers too, and late faults on some copies.
TEST_F(StreamOrderedBreakTest, ManyThreadsWithWritersAndLateFaults) {
  constexpr int kTensors = 4;
  Open(2, kTensors);
  device_->set_late_copy_faults(true);
  device_->set_spec({.nth = 3, .ops = FaultOps::kH2D, .kind = FaultKind::kEio});
  device_->gate().Arm(GateOp::kEventWait, 100000);
  std::atomic<int> bad{0}, done{0}, unexpected{0};
  std::vector<std::thread> threads;
  std::mutex err_mu;
  std::string first_error;
  // Each tensor's content is always pattern 7+k: writers rewrite the same.
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int k = (t + i) % kTensors;
        absl::Status s;
        if (t == 0 && i % 2 == 0) {
          s = store_->Write(ids_[k], Pattern(kSize, 7 + k).data(), kSize);
        } else {
          const Access acc =
              (t == 1 && i % 4 == 1) ? Access::kWrite : Access::kRead;
          absl::StatusOr<Lease> l =
              store_->Acquire(ids_[k], Tier::kDevice, acc);
          s = l.status();
          if (l.ok()) {
            std::vector<std::byte> got(kSize);
            if (!l->CopyOut(0, got.data(), kSize).ok() ||
                !MatchesPattern(got.data(), kSize, 7 + k)) {
              // Only a lease whose Release then reports the fault may see
              // undefined bytes.
              s = l->Release();
              if (s.ok()) ++bad;
              continue;
            }
            s = l->Release();
          }
        }
        if (!s.ok() && s.code() != FaultyDevice::InjectedCode() &&
            s.code() != absl::StatusCode::kFailedPrecondition &&
            s.code() != absl::StatusCode::kResourceExhausted) {
          ++unexpected;
          std::lock_guard<std::mutex> g(err_mu);
          if (first_error.empty()) first_error = s.ToString();
        }
      }
      ++done;
    });
  }
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5));
  device_->gate().Release(GateOp::kEventWait);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (done.load() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(done.load(), 6) << "threads hung";
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0) << "a lease saw wrong bytes and was told OK";
  EXPECT_EQ(unexpected.load(), 0) << first_error;
  ASSERT_TRUE(QueuedLoadsEnd());
  std::cout << "queued_loads=" << store_->GetStats().queued_loads
            << " injected=" << device_->injected() << "\n";
  for (int k = 0; k < kTensors; ++k) {
    absl::StatusOr<std::vector<std::byte>> got = ReadAll(k);
    if (!got.ok()) got = ReadAll(k);  // a pending late error first
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesPattern(got->data(), kSize, 7 + k)) << "t" << k;
  }
}

// Prefetch on, trace trained over a few steps; then a step with the copies'
// events held and a late fault; prefetches and acquires meet queued copies.
TEST_F(StreamOrderedBreakTest, PrefetchWithATrainedTraceAndHeldCopies) {
  constexpr int kTensors = 4;
  Open(2, kTensors, /*prefetch=*/true);
  auto step = [&](int* bad, int* errs, bool reverse = false) {
    store_->BeginStep();
    for (int j = 0; j < kTensors; ++j) {
      const int k = reverse ? kTensors - 1 - j : j;
      absl::StatusOr<Lease> l =
          store_->Acquire(ids_[k], Tier::kDevice, Access::kRead);
      if (!l.ok()) {
        ++*errs;
        continue;
      }
      std::vector<std::byte> got(kSize);
      const bool ok = l->CopyOut(0, got.data(), kSize).ok() &&
                      MatchesPattern(got.data(), kSize, 7 + k);
      const absl::Status r = l->Release();
      if (!r.ok()) ++*errs;
      if (!ok && r.ok()) ++*bad;
    }
    store_->EndStep();
  };
  int bad = 0, errs = 0;
  for (int s = 0; s < 3; ++s) step(&bad, &errs);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(errs, 0);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait, 100000);
  auto f = std::async(std::launch::async, [&] {
    int b = 0, e = 0;
    for (int s = 0; s < 3; ++s) step(&b, &e, /*reverse=*/s % 2 == 0);
    return std::make_pair(b, e);
  });
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 1, absl::Seconds(5));
  f.wait_for(kBlocked);
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(f.wait_for(kBound), std::future_status::ready) << "step hung";
  auto [b, e] = f.get();
  EXPECT_EQ(b, 0) << "a lease saw wrong bytes and was told OK";
  ASSERT_TRUE(QueuedLoadsEnd());
  for (int k = 0; k < kTensors; ++k) {
    absl::StatusOr<std::vector<std::byte>> got = ReadAll(k);
    if (!got.ok()) got = ReadAll(k);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesPattern(got->data(), kSize, 7 + k)) << "t" << k;
  }
  const Stats s = store_->GetStats();
  EXPECT_EQ(s.queued_loads_in_flight, 0u);
  std::cout << "queued_loads=" << s.queued_loads
            << " injected=" << device_->injected() << " errs=" << e
            << " prefetch_hit=" << s.prefetch.hit << "\n";
}

}  // namespace
}  // namespace strata
