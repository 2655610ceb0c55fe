// stream_ordered_break_test_util.h: the fixture of the adversarial tests of
// the stream-ordered device acquire (tests/src/stream_ordered_break_test.cc,
// stream_ordered_interleaving_test.cc, stream_ordered_threads_test.cc): a
// store on a FaultyDevice whose kEventWait gate keeps a queued copy's event
// pending while armed and whose late copy faults fail a copy after its
// acquire returned, with bounded helpers to read, lease and wait, so that a
// test that would hang fails by a timeout instead.
#ifndef STRATA_TESTS_UTIL_STREAM_ORDERED_BREAK_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_STREAM_ORDERED_BREAK_TEST_UTIL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/faulty_device_seams.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata::testing {

class StreamOrderedBreakTest : public ::testing::Test {
 protected:
  using State = Residency::State;

  static constexpr uint64_t kSize = 1 << 20;  // bytes per tensor
  // The most any wait may take before the test fails instead of hanging.
  static constexpr auto kBound = std::chrono::seconds(20);
  // How long an operation that must wait is seen waiting.
  static constexpr auto kBlocked = std::chrono::milliseconds(200);

  // Opens the store: a device budget of `device_tensors` tensors, and
  // `tensors` host-homed tensors, t<i> holding Pattern(kSize, 7 + i).
  void Open(uint64_t device_tensors, int tensors, bool prefetch = false) {
    StoreOptions options = SmallStoreOptions(
        dir_.path(), device_tensors * kSize, 16 * kSize, 32 * kSize);
    options.scheduler.prefetch = prefetch;
    auto store = OpenStore(options, FaultyDeviceSeams(&device_));
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

  TempDir dir_;
  FaultyDevice* device_ = nullptr;
  std::unique_ptr<Store> store_;
  std::vector<TensorId> ids_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_STREAM_ORDERED_BREAK_TEST_UTIL_H_
