// faulty_device_test.cc: FaultyDevice — fail the Nth copy, seeded rates, kind
// selection, the copied prefix, runtime spec changes and thread safety.
#include "tiers/fault/faulty_device.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "strata/options.h"
#include "tests/test_util.h"
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
  CopyFaultSpec spec;
  spec.fail_nth = 3;
  device_->set_spec(spec);
  EXPECT_TRUE(H2D(100).ok());
  EXPECT_TRUE(H2D(100).ok());
  absl::Status third = H2D(100);
  EXPECT_EQ(third.code(), absl::StatusCode::kInternal);
  EXPECT_NE(third.message().find("injected copy fault"), std::string::npos);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(H2D(100).ok());
  EXPECT_EQ(device_->injected(), 1u);
}

TEST_F(FaultyDeviceTest, OnlyTheChosenKindFails) {
  CopyFaultSpec spec;
  spec.rate = 1.0;
  spec.h2d = false;
  device_->set_spec(spec);
  std::vector<std::byte> host(256);
  EXPECT_TRUE(H2D(256).ok());
  EXPECT_EQ(device_->Copy(CopyKind::kD2H, host.data(), arena_, 256).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(device_->injected(), 1u);
}

TEST_F(FaultyDeviceTest, AFailedCopyLeavesAPrefixAndTheSourceIntact) {
  constexpr uint64_t kBytes = 1 << 20;
  std::vector<std::byte> src(kBytes), dst(kBytes);
  FillPattern(src.data(), kBytes, 1);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, arena_, src.data(), kBytes).ok());
  CopyFaultSpec spec;
  spec.fail_nth = 1;
  device_->set_spec(spec);
  EXPECT_FALSE(device_->Copy(CopyKind::kD2H, dst.data(), arena_, kBytes).ok());
  EXPECT_TRUE(MatchesPattern(dst.data(), kBytes / 2, 1));  // prefix copied
  EXPECT_FALSE(MatchesPattern(dst.data(), kBytes, 1));     // not the rest
  EXPECT_TRUE(MatchesPattern(arena_, kBytes, 1));          // source intact
}

TEST_F(FaultyDeviceTest, NoPrefixWhenDisabled) {
  std::vector<std::byte> src(4096), dst(4096);
  FillPattern(src.data(), src.size(), 2);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, arena_, src.data(), 4096).ok());
  CopyFaultSpec spec;
  spec.fail_nth = 1;
  spec.copy_prefix = false;
  device_->set_spec(spec);
  EXPECT_FALSE(device_->Copy(CopyKind::kD2H, dst.data(), arena_, 4096).ok());
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
  CopyFaultSpec spec;
  spec.seed = 1234;
  spec.rate = 0.3;
  device_->set_spec(spec);
  const std::vector<bool> first = Outcomes(*device_, arena_, 400);
  device_->set_spec(spec);
  EXPECT_EQ(Outcomes(*device_, arena_, 400), first);
  const uint64_t failures = device_->injected() / 2;
  EXPECT_GT(failures, 60u);  // about 120 expected
  EXPECT_LT(failures, 200u);
}

TEST_F(FaultyDeviceTest, ConcurrentCopiesCountEveryInjection) {
  CopyFaultSpec spec;
  spec.seed = 5;
  spec.rate = 0.5;
  device_->set_spec(spec);
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

}  // namespace
}  // namespace strata
