// Unit tests for ExtentAllocator: best fit, alignment, coalescing, counters,
// and a randomized check against a byte-map reference.
#include "src/extent_allocator.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace strata {
namespace {

TEST(ExtentAllocatorTest, RoundsToAlignment) {
  ExtentAllocator a(1 << 20, 4096);
  auto e = a.Allocate(1);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->offset, 0u);
  EXPECT_EQ(e->bytes, 4096u);
  auto f = a.Allocate(4097);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->offset, 4096u);
  EXPECT_EQ(f->bytes, 8192u);
  EXPECT_EQ(a.used_bytes(), 12288u);
  EXPECT_EQ(a.allocations(), 2u);
}

TEST(ExtentAllocatorTest, CapacityRoundedDownAndZeroRefused) {
  ExtentAllocator a(10000, 4096);
  EXPECT_EQ(a.capacity(), 8192u);
  EXPECT_FALSE(a.Allocate(0).has_value());
  EXPECT_FALSE(a.Allocate(8193).has_value());
  EXPECT_TRUE(a.Allocate(8192).has_value());
  EXPECT_FALSE(a.Allocate(1).has_value());
}

TEST(ExtentAllocatorTest, BestFitPicksSmallestHole) {
  ExtentAllocator a(100 * 256, 256);
  // Carve holes of 3, 1 and 2 units separated by live extents.
  std::vector<Extent> e;
  for (int units : {3, 1, 1, 1, 2, 1}) e.push_back(*a.Allocate(units * 256));
  a.Free(e[0]);  // hole of 3 at 0
  a.Free(e[2]);  // hole of 1 at 4*256
  a.Free(e[4]);  // hole of 2 at 6*256
  auto one = a.Allocate(256);
  EXPECT_EQ(one->offset, 4u * 256);
  auto two = a.Allocate(2 * 256);
  EXPECT_EQ(two->offset, 6u * 256);
  auto three = a.Allocate(3 * 256);
  EXPECT_EQ(three->offset, 0u);
}

TEST(ExtentAllocatorTest, LowAndHighPackAgainstOppositeEnds) {
  ExtentAllocator a(1024, 64);
  const auto low1 = a.Allocate(64, Placement::kLow);
  const auto high1 = a.Allocate(128, Placement::kHigh);
  const auto low2 = a.Allocate(64, Placement::kLow);
  const auto high2 = a.Allocate(256, Placement::kHigh);
  ASSERT_TRUE(low1 && high1 && low2 && high2);
  EXPECT_EQ(low1->offset, 0u);
  EXPECT_EQ(low2->offset, 64u);
  EXPECT_EQ(high1->offset, 1024u - 128);
  EXPECT_EQ(high2->offset, 1024u - 128 - 256);
  // Freeing low1 leaves a 64-byte hole at the bottom: kLow reuses it, kHigh
  // takes the top of the middle range instead.
  a.Free(*low1);
  const auto high3 = a.Allocate(128, Placement::kHigh);
  ASSERT_TRUE(high3);
  EXPECT_EQ(high3->offset, 1024u - 128 - 256 - 128);
  const auto low3 = a.Allocate(64, Placement::kLow);
  ASSERT_TRUE(low3);
  EXPECT_EQ(low3->offset, 0u);
  // The free space between the two ends stays one range.
  EXPECT_EQ(a.largest_free_bytes(), 1024u - 128 - 256 - 128 - 128);
  EXPECT_EQ(a.used_bytes(), 128u + 128 + 256 + 128);
}

TEST(ExtentAllocatorTest, CoalescesBothNeighbours) {
  ExtentAllocator a(3 * 4096, 4096);
  auto x = *a.Allocate(4096);
  auto y = *a.Allocate(4096);
  auto z = *a.Allocate(4096);
  a.Free(x);
  a.Free(z);
  EXPECT_EQ(a.largest_free_bytes(), 4096u);
  a.Free(y);
  EXPECT_EQ(a.largest_free_bytes(), 3u * 4096);
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_EQ(a.peak_used_bytes(), 3u * 4096);
  EXPECT_EQ(a.frees(), 3u);
  EXPECT_TRUE(a.Allocate(3 * 4096).has_value());
}

// Random allocate/free against a map of owned units: no overlap, no leak, and
// after freeing everything the arena is one free range again.
TEST(ExtentAllocatorTest, RandomizedAgainstReference) {
  constexpr uint64_t kUnit = 256, kUnits = 4096;
  ExtentAllocator a(kUnits * kUnit, kUnit);
  std::vector<int> owner(kUnits, -1);
  std::vector<Extent> live;
  std::mt19937_64 rng(42);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t bytes = 1 + rng() % (64 * kUnit);
      auto e = a.Allocate(bytes, static_cast<Placement>(rng() % 3));
      if (!e) continue;
      ASSERT_EQ(e->offset % kUnit, 0u);
      ASSERT_GE(e->bytes, bytes);
      for (uint64_t u = e->offset / kUnit; u < (e->offset + e->bytes) / kUnit;
           ++u) {
        ASSERT_EQ(owner[u], -1) << "overlap at unit " << u;
        owner[u] = step;
      }
      live.push_back(*e);
    } else {
      const size_t i = rng() % live.size();
      for (uint64_t u = live[i].offset / kUnit;
           u < (live[i].offset + live[i].bytes) / kUnit; ++u) {
        owner[u] = -1;
      }
      a.Free(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    uint64_t used = 0;
    for (const Extent& e : live) used += e.bytes;
    ASSERT_EQ(a.used_bytes(), used);
  }
  for (const Extent& e : live) a.Free(e);
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_EQ(a.largest_free_bytes(), kUnits * kUnit);
}

}  // namespace
}  // namespace strata
