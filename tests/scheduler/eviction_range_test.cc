// Unit tests for PickVictimRange (scheduler/eviction_range.h) on hand-built
// arenas: the window of evictable copies whose soonest next use is furthest,
// walls it cannot cross, and the cases with nothing to evict.
#include "scheduler/eviction_range.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace strata {
namespace {

constexpr uint64_t kUnit = 4096;

// A valid, clean, unleased host copy of `units` units at `at` units.
CopyView Copy(uint64_t id, uint64_t at, uint64_t units, uint64_t next_use) {
  return CopyView{.id = TensorId{id},
                  .tier = Tier::kHost,
                  .bytes = units * kUnit,
                  .offset = at * kUnit,
                  .state = CopyState::kValid,
                  .has_contents = true,
                  .next_use = next_use};
}
FreeRange Free(uint64_t at, uint64_t units) {
  return {at * kUnit, units * kUnit};
}
const EvictionQuery kHost{.tier = Tier::kHost};

// Arena of 8 units: [0,1) free, copy 1 [1,2) used next at 10, copy 2 [2,3)
// used at 50, [3,4) free, copy 3 [4,5) used at 90, copy 4 [5,6) used at 80,
// [6,7) free, copy 5 [7,8) used at 70. Per-copy Belady would evict 3, 4, 5
// and still find no 3 units together; the best window of 3 units is copies
// 3 and 4 with the free unit before them (soonest use 80).
TEST(EvictionRangeTest, PicksTheWindowWhoseSoonestUseIsFurthest) {
  const std::vector<CopyView> copies = {Copy(1, 1, 1, 10), Copy(2, 2, 1, 50),
                                        Copy(3, 4, 1, 90), Copy(4, 5, 1, 80),
                                        Copy(5, 7, 1, 70)};
  const std::vector<FreeRange> free = {Free(0, 1), Free(3, 1), Free(6, 1)};
  EXPECT_EQ(PickVictimRange(copies, free, 3 * kUnit, kHost),
            (std::vector<size_t>{2, 3}));
  // Two units: copy 3 and the free unit before it.
  EXPECT_EQ(PickVictimRange(copies, free, 2 * kUnit, kHost),
            (std::vector<size_t>{2}));
}

// A copy that may not be evicted (leased, or protected as needed sooner)
// and space that is no copy at all are walls.
TEST(EvictionRangeTest, WindowsDoNotCrossCopiesThatMustStay) {
  std::vector<CopyView> copies = {Copy(1, 0, 1, 90), Copy(2, 1, 1, 10),
                                  Copy(3, 2, 1, 80), Copy(4, 4, 1, 70)};
  const std::vector<FreeRange> free = {Free(3, 1)};
  // Copies 3, free, 4 (soonest 70) beat 1, 2 (soonest 10).
  EXPECT_EQ(PickVictimRange(copies, free, 3 * kUnit, kHost),
            (std::vector<size_t>{2, 3}));
  copies[2].leased = true;
  EXPECT_EQ(PickVictimRange(copies, free, 2 * kUnit, kHost),
            (std::vector<size_t>{3}));  // free + copy 4
  EXPECT_EQ(PickVictimRange(copies, free, 3 * kUnit, kHost), std::nullopt);
  // Protecting uses before 20 makes copy 2 a wall: no 4 units anywhere.
  copies[2].leased = false;
  EvictionQuery protect = kHost;
  protect.protect_within = 20;
  EXPECT_EQ(PickVictimRange(copies, free, 4 * kUnit, protect), std::nullopt);
  // Unit 5 is held by something that is not a copy: a wall too.
  EXPECT_EQ(PickVictimRange({Copy(1, 4, 1, 90), Copy(2, 6, 1, 90)},
                            {Free(3, 1)}, 3 * kUnit, kHost),
            std::nullopt);
}

TEST(EvictionRangeTest, AFreeRangeThatFitsNeedsNoVictims) {
  EXPECT_EQ(PickVictimRange({Copy(1, 0, 1, 5)}, {Free(1, 2)}, 2 * kUnit, kHost),
            (std::vector<size_t>{}));
}

// At equal soonest use, the window with fewer dirty bytes wins (a clean copy
// is dropped, a dirty one written back first).
TEST(EvictionRangeTest, PrefersCleanCopiesAtEqualNextUse) {
  std::vector<CopyView> copies = {Copy(1, 0, 1, 50), Copy(2, 2, 1, 50)};
  copies[0].dirty = true;  // its home copy is absent: it can take it
  EXPECT_EQ(PickVictimRange(copies, {Free(1, 1), Free(3, 1)}, 2 * kUnit, kHost),
            (std::vector<size_t>{1}));
}

}  // namespace
}  // namespace strata
