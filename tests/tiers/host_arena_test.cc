// host_arena_test.cc: HostArena — 2 MiB alignment, 4 KiB rounding, writable
// memory, the physical-memory check and registration policy.
#include "tiers/host/host_arena.h"

#include <cstring>

#include "base/system_info.h"
#include "gtest/gtest.h"
#include "strata/options.h"
#include "tests/util/test_util.h"
#include "tiers/device/simulated_device.h"

namespace strata {
namespace {

TEST(HostArenaTest, BaseIsTwoMiBAlignedAndSizeRoundedToFourKiB) {
  auto arena = HostArena::Create(3 * kMiB + 1, /*lock_memory=*/false, nullptr);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*arena)->base()) % (2 * kMiB), 0u);
  EXPECT_EQ((*arena)->size_bytes(), 3 * kMiB + 4096);
  EXPECT_FALSE((*arena)->registered());
}

TEST(HostArenaTest, MemoryIsWritableEndToEnd) {
  auto arena = HostArena::Create(5 * kMiB, /*lock_memory=*/false, nullptr);
  ASSERT_TRUE(arena.ok());
  std::byte* base = (*arena)->base();
  const uint64_t n = (*arena)->size_bytes();
  testing::FillPattern(base, n, 3);
  EXPECT_TRUE(testing::MatchesPattern(base, n, 3));
}

TEST(HostArenaTest, ManyArenasAreAllAligned) {
  for (int i = 0; i < 8; ++i) {
    auto arena =
        HostArena::Create(4096 * (i + 1), /*lock_memory=*/false, nullptr);
    ASSERT_TRUE(arena.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>((*arena)->base()) % (2 * kMiB), 0u);
  }
}

TEST(HostArenaTest, LockingIsBestEffort) {
  // mlock may fail under a small RLIMIT_MEMLOCK; Create must succeed anyway.
  auto arena = HostArena::Create(kMiB, /*lock_memory=*/true, nullptr);
  ASSERT_TRUE(arena.ok()) << arena.status();
  std::memset((*arena)->base(), 1, kMiB);
}

TEST(HostArenaTest, BudgetAbovePhysicalMemoryIsResourceExhausted) {
  const uint64_t physical = PhysicalMemoryBytes();
  ASSERT_GT(physical, 0u);
  auto arena = HostArena::Create(physical + kGiB, false, nullptr);
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(arena.status().message().find("--host-budget"), std::string::npos)
      << arena.status();
}

TEST(HostArenaTest, ZeroBytesIsInvalidArgument) {
  EXPECT_EQ(HostArena::Create(0, false, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostArenaTest, SimulatedDeviceIsNotRegistered) {
  auto device = SimulatedDevice::Create(DeviceOptions());
  ASSERT_TRUE(device.ok());
  auto arena = HostArena::Create(kMiB, false, device->get());
  ASSERT_TRUE(arena.ok());
  EXPECT_FALSE((*arena)->registered());
}

}  // namespace
}  // namespace strata
