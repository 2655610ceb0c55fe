// device_reader_wait_test.cc: the memory of a device copy is freed only once
// the kernels of its last lease have ended (DESIGN: release records an event
// on the caller's stream that eviction waits for). A freed range is reused
// at once by the store's copy streams, which know nothing of the caller's:
// on a GPU, a kernel still reading an evicted tensor would otherwise see the
// next tensor's bytes. Forced with FaultyDevice's kEventWait gate, whose
// recorded events stay pending (not Done) while it is armed, as if the
// caller's kernels were still running: eviction, Destroy and a Write beside
// the only copy each wait in the event's Synchronize until the gate opens.
// Runs on a GPU too (bench/gpu_check.sh sets STRATA_DEVICE=cuda): the events
// are then CUDA events behind the gate.
#include <chrono>
#include <future>
#include <memory>
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

class DeviceReaderWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Room on the device for one of the two tensors; no prefetch, so only
    // the test's own acquires move bytes.
    StoreOptions options = ::strata::testing::SmallStoreOptions(
        dir_.path(), kSize, 8 * kSize, 16 * kSize);
    options.scheduler.prefetch = false;
    auto store =
        OpenStore(options, ::strata::testing::FaultyDeviceSeams(&device_));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    for (int i = 0; i < 2; ++i) {
      ids_[i] = *store_->Create({.name = i == 0 ? "a" : "b",
                                 .size_bytes = kSize,
                                 .home = Tier::kHost});
      ASSERT_TRUE(
          store_->Write(ids_[i], Pattern(kSize, 10 + i).data(), kSize).ok());
    }
  }
  void TearDown() override {
    if (device_ != nullptr) device_->gate().ReleaseAll();
  }

  // Leases `a` on the device and releases it: its release event is the
  // FaultyDevice's, pending while kEventWait is armed.
  void UseOnDevice(int i) {
    auto lease = store_->Acquire(ids_[i], Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->Release().ok());
  }
  State DeviceState(int i) {
    return store_->GetResidency(ids_[i])
        ->tiers[static_cast<int>(Tier::kDevice)];
  }
  // Runs `call` on another thread; it must park in the event's Synchronize
  // (the "kernels" of the last lease still running) and go on only when the
  // gate opens. Returns what `call` returned.
  template <typename Call>
  auto ParksUntilTheKernelsEnd(Call call) {
    std::future<decltype(call())> result =
        std::async(std::launch::async, std::move(call));
    const bool parked =
        device_->gate().WaitUntilHeld(GateOp::kEventWait, 1, absl::Seconds(20));
    EXPECT_TRUE(parked) << "the memory was freed without waiting for the "
                           "kernels of its last lease";
    // Parked in the gate, the call cannot have returned.
    EXPECT_EQ(result.wait_for(std::chrono::seconds(0)),
              std::future_status::timeout);
    device_->gate().Release(GateOp::kEventWait);
    return result.get();
  }

  ::strata::testing::TempDir dir_;
  FaultyDevice* device_ = nullptr;
  std::unique_ptr<Store> store_;
  TensorId ids_[2];
};

TEST_F(DeviceReaderWaitTest, EvictionWaitsForTheKernelsOfTheLastLease) {
  UseOnDevice(0);
  device_->gate().Arm(GateOp::kEventWait);  // a's kernels still run
  // b needs a's room on the device.
  absl::StatusOr<Lease> b = ParksUntilTheKernelsEnd(
      [&] { return store_->Acquire(ids_[1], Tier::kDevice, Access::kRead); });
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<std::byte> got(kSize);  // device memory: copied out, not read
  ASSERT_TRUE(b->CopyOut(0, got.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(got.data(), kSize, 11));
  EXPECT_EQ(DeviceState(0), State::kAbsent);
  EXPECT_EQ(store_->GetStats().device_reader_waits, 1u);
  ASSERT_TRUE(b->Release().ok());
  // a's bytes came through whole (its host copy was its home).
  std::vector<std::byte> out(kSize);
  ASSERT_TRUE(store_->Read(ids_[0], out.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), kSize, 10));
}

TEST_F(DeviceReaderWaitTest, KernelsThatEndedCostNoWait) {
  UseOnDevice(0);
  auto b = store_->Acquire(ids_[1], Tier::kDevice, Access::kRead);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(DeviceState(0), State::kAbsent);
  EXPECT_EQ(store_->GetStats().device_reader_waits, 0u);
  EXPECT_EQ(device_->gate().held(GateOp::kEventWait), 0u);
}

TEST_F(DeviceReaderWaitTest, DestroyWaitsForTheKernelsOfTheLastLease) {
  UseOnDevice(0);
  device_->gate().Arm(GateOp::kEventWait);
  const absl::Status destroyed =
      ParksUntilTheKernelsEnd([&] { return store_->Destroy(ids_[0]); });
  EXPECT_TRUE(destroyed.ok()) << destroyed;
  EXPECT_EQ(store_->GetStats().device_reader_waits, 1u);
}

TEST_F(DeviceReaderWaitTest, AWriteBesideTheOnlyCopyWaitsForItsReaders) {
  // A device-home tensor: its device copy is the only one, so a Write makes
  // a fresh copy beside it and frees the old one.
  StoreOptions options = ::strata::testing::SmallStoreOptions(
      dir_.path(), 4 * kSize, 8 * kSize, 16 * kSize);
  options.scheduler.prefetch = false;
  store_.reset();
  auto store =
      OpenStore(options, ::strata::testing::FaultyDeviceSeams(&device_));
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = std::move(*store);
  const TensorId id = *store_->Create(
      {.name = "resident", .size_bytes = kSize, .home = Tier::kDevice});
  ASSERT_TRUE(store_->Write(id, Pattern(kSize, 3).data(), kSize).ok());
  auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(lease->Release().ok());
  device_->gate().Arm(GateOp::kEventWait);
  const std::vector<std::byte> part = Pattern(4096, 4);
  const absl::Status written = ParksUntilTheKernelsEnd(
      [&] { return store_->Write(id, part.data(), part.size(), 8192); });
  ASSERT_TRUE(written.ok()) << written;
  std::vector<std::byte> out(kSize);
  ASSERT_TRUE(store_->Read(id, out.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(out.data() + 8192, 4096, 4));
  EXPECT_TRUE(MatchesPattern(out.data(), 8192, 3));
}

}  // namespace
}  // namespace strata
