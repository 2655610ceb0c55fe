// faulty_device_test.cc: FaultyDevice — fail the Nth copy, seeded rates,
// direction selection, torn copies, runtime spec changes, thread safety, and
// its gate holding a copy in flight.
#include "tiers/fault/faulty_device.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "strata/options.h"
#include "tests/util/test_util.h"
#include "tiers/device/simulated_device.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

class FaultyDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceOptions options;
    options.budget_bytes = 4 * kMiB;
    options.sim_memory_bytes = 4 * kMiB;
    options.copy_chunk_bytes = 64 * 1024;
    auto inner = SimulatedDevice::Create(options);
    ASSERT_TRUE(inner.ok());
    device_ = std::make_unique<FaultyDevice>(std::move(*inner));
    auto arena = device_->ReserveArena(4 * kMiB);
    ASSERT_TRUE(arena.ok());
    arena_ = *arena;
  }

  absl::Status H2D(uint64_t n) {
    std::vector<std::byte> src(n);
    return device_->Copy(CopyKind::kH2D, arena_, src.data(), n);
  }

  std::unique_ptr<FaultyDevice> device_;
  std::byte* arena_ = nullptr;
};

TEST_F(FaultyDeviceTest, ForwardsWithoutASpec) {
  EXPECT_EQ(device_->name(), "simulated");
  EXPECT_TRUE(device_->is_simulated());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(H2D(4096).ok());
  EXPECT_EQ(device_->injected(), 0u);
  auto info = device_->GetMemInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->free_bytes, 0u);
}

TEST_F(FaultyDeviceTest, FailsExactlyTheNthCopy) {
  device_->set_spec({.nth = 3});
  EXPECT_TRUE(H2D(100).ok());
  EXPECT_TRUE(H2D(100).ok());
  absl::Status third = H2D(100);
  EXPECT_EQ(third.code(), absl::StatusCode::kInternal);
  EXPECT_NE(third.message().find("injected copy fault"), std::string::npos);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(H2D(100).ok());
  EXPECT_EQ(device_->injected(), 1u);
}

TEST_F(FaultyDeviceTest, OnlyTheChosenKindFails) {
  device_->set_spec({.rate = 1.0, .ops = FaultOps::kD2H});
  std::vector<std::byte> host(256);
  EXPECT_TRUE(H2D(256).ok());
  EXPECT_EQ(device_->Copy(CopyKind::kD2H, host.data(), arena_, 256).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(device_->injected(), 1u);
}

TEST_F(FaultyDeviceTest, BlockIoKindsAndOpsMatchNoCopy) {
  for (FaultKind kind : {FaultKind::kEnospc, FaultKind::kShortRead,
                         FaultKind::kShortWrite, FaultKind::kBitFlip}) {
    device_->set_spec({.rate = 1.0, .kind = kind});
    EXPECT_TRUE(H2D(256).ok());
  }
  for (FaultOps ops : {FaultOps::kReads, FaultOps::kWrites}) {
    device_->set_spec({.rate = 1.0, .ops = ops});
    EXPECT_TRUE(H2D(256).ok());
  }
  EXPECT_EQ(device_->injected(), 0u);
}

TEST_F(FaultyDeviceTest, ATornCopyLeavesAPrefixAndTheSourceIntact) {
  constexpr uint64_t kBytes = 1 << 20;
  std::vector<std::byte> src(kBytes), dst(kBytes);
  FillPattern(src.data(), kBytes, 1);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, arena_, src.data(), kBytes).ok());
  device_->set_spec({.nth = 1, .kind = FaultKind::kTornCopy});
  EXPECT_EQ(device_->Copy(CopyKind::kD2H, dst.data(), arena_, kBytes).code(),
            FaultyDevice::InjectedCode());
  EXPECT_TRUE(MatchesPattern(dst.data(), kBytes / 2, 1));  // prefix copied
  EXPECT_FALSE(MatchesPattern(dst.data(), kBytes, 1));     // not the rest
  EXPECT_TRUE(MatchesPattern(arena_, kBytes, 1));          // source intact
}

TEST_F(FaultyDeviceTest, AnEioCopyMovesNothing) {
  std::vector<std::byte> src(4096), dst(4096);
  FillPattern(src.data(), src.size(), 2);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, arena_, src.data(), 4096).ok());
  device_->set_spec({.nth = 1, .kind = FaultKind::kEio});
  EXPECT_EQ(device_->Copy(CopyKind::kD2H, dst.data(), arena_, 4096).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(dst, std::vector<std::byte>(4096));
}

std::vector<bool> Outcomes(FaultyDevice& device, std::byte* arena, int n) {
  std::vector<bool> failed;
  std::vector<std::byte> src(64);
  for (int i = 0; i < n; ++i) {
    failed.push_back(
        !device.Copy(CopyKind::kH2D, arena, src.data(), src.size()).ok());
  }
  return failed;
}

TEST_F(FaultyDeviceTest, RateIsSeededAndReproducible) {
  const FaultSpec spec{.seed = 1234, .rate = 0.3};
  device_->set_spec(spec);
  const std::vector<bool> first = Outcomes(*device_, arena_, 400);
  device_->set_spec(spec);
  EXPECT_EQ(Outcomes(*device_, arena_, 400), first);
  const uint64_t failures = device_->injected() / 2;
  EXPECT_GT(failures, 60u);  // about 120 expected
  EXPECT_LT(failures, 200u);
}

TEST_F(FaultyDeviceTest, ConcurrentCopiesCountEveryInjection) {
  device_->set_spec({.seed = 5, .rate = 0.5});
  std::atomic<uint64_t> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::byte> src(512);
      for (int i = 0; i < 100; ++i) {
        absl::Status s = device_->Copy(CopyKind::kH2D, arena_ + t * 4096,
                                       src.data(), src.size());
        if (!s.ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(device_->injected(), failed.load());
  EXPECT_GT(failed.load(), 0u);
}

// The gate parks an H2D copy before it moves a byte; a D2H copy passes
// meanwhile; the held copy finishes once released, faulted by the spec that
// was set while it waited.
TEST_F(FaultyDeviceTest, GateHoldsACopyUntilReleased) {
  constexpr uint64_t kBytes = 64 * 1024;
  std::vector<std::byte> src(kBytes), back(kBytes);
  FillPattern(src.data(), kBytes, 3);
  Gate& gate = device_->gate();
  gate.Arm(GateOp::kH2D);
  absl::Status held_status;
  std::thread copier([&] {
    held_status = device_->Copy(CopyKind::kH2D, arena_, src.data(), kBytes);
  });
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kH2D));
  EXPECT_EQ(gate.parked(GateOp::kH2D), 1);
  EXPECT_FALSE(MatchesPattern(arena_, kBytes, 3)) << "moved while held";
  EXPECT_TRUE(device_->Copy(CopyKind::kD2H, back.data(), arena_, 16).ok());
  device_->set_spec({.nth = 1, .ops = FaultOps::kH2D});
  gate.Release(GateOp::kH2D);
  copier.join();
  EXPECT_EQ(held_status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(gate.held(GateOp::kH2D), 1u);
  EXPECT_EQ(gate.parked(GateOp::kH2D), 0);
  // Released means disarmed: the next copy passes and moves its bytes.
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, arena_, src.data(), kBytes).ok());
  EXPECT_TRUE(MatchesPattern(arena_, kBytes, 3));
  EXPECT_EQ(gate.held(GateOp::kH2D), 1u);
}

// Unified-memory hints and discards pass the gate as their own ops.
TEST(FaultyDeviceGateTest, GateSeesHintsAndDiscards) {
  DeviceOptions options;
  options.budget_bytes = kMiB;
  options.sim_memory_bytes = 512 * kMiB;  // room for managed memory
  auto inner = SimulatedDevice::Create(options);
  ASSERT_TRUE(inner.ok());
  FaultyDevice device(std::move(*inner));
  auto managed = device.ReserveManaged(kMiB);
  ASSERT_TRUE(managed.ok()) << managed.status();
  const ManagedRange range{*managed, 4096};
  Gate& gate = device.gate();
  for (GateOp op : {GateOp::kPrefetchToDevice, GateOp::kPrefetchToHost,
                    GateOp::kDiscard, GateOp::kFaultToDevice}) {
    SCOPED_TRACE(GateOpName(op));
    gate.Arm(op);
    std::thread hint([&] {
      absl::Status s;
      switch (op) {
        case GateOp::kPrefetchToDevice:
        case GateOp::kPrefetchToHost:
          s = device.PrefetchManaged({&range, 1},
                                     op == GateOp::kPrefetchToDevice
                                         ? MemLocation::kDevice
                                         : MemLocation::kHost,
                                     /*discard=*/false);
          break;
        case GateOp::kDiscard:
          s = device.DiscardManaged({&range, 1});
          break;
        default:
          s = device.ServeFault(range, MemLocation::kDevice);
          break;
      }
      EXPECT_TRUE(s.ok()) << s;
    });
    ASSERT_TRUE(gate.WaitUntilHeld(op));
    gate.Release(op);
    hint.join();
    EXPECT_EQ(gate.held(op), 1u);
  }
}

TEST_F(FaultyDeviceTest, WaitUntilHeldTimesOutWhenNothingComes) {
  device_->gate().Arm(GateOp::kD2H);
  EXPECT_FALSE(
      device_->gate().WaitUntilHeld(GateOp::kD2H, 1, absl::Milliseconds(1)));
  device_->gate().ReleaseAll();
  EXPECT_EQ(device_->gate().held(GateOp::kD2H), 0u);
}

}  // namespace
}  // namespace strata
