// Compaction (src/compaction.h, src/store_compaction.cc): when a tier has
// the bytes a copy needs but not in one range, idle copies move within the
// tier instead of being evicted. PlanCompaction's choice of window and
// targets on hand-built arenas, ExtentAllocator::AllocateAt, and the store
// moving a copy (contents intact, no NVMe byte) where it used to evict.
#include "src/compaction.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "src/extent_allocator.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/faulty_device_seams.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

constexpr uint64_t kPage = 4096;

// An arena of `pages` pages filled by extents of the given page counts, in
// order from offset 0; the extents whose index is in `freed` are freed.
struct Arena {
  Arena(uint64_t pages, const std::vector<uint64_t>& sizes,
        const std::vector<size_t>& freed)
      : arena(pages * kPage, kPage) {
    for (uint64_t s : sizes) {
      extents.push_back(*arena.Allocate(s * kPage, Placement::kLow));
    }
    for (size_t i : freed) arena.Free(extents[i]);
  }
  ExtentAllocator arena;
  std::vector<Extent> extents;
};

TEST(PlanCompactionTest, MovesTheCheapestExtentOutOfTheWindow) {
  // A A _ _ C C _ _ : 4 pages free in two holes; a 4-page request.
  Arena a(8, {2, 2, 2, 2}, {1, 3});
  std::optional<Compaction> plan =
      PlanCompaction(a.arena, {{a.extents[0]}, {a.extents[2]}}, 4 * kPage);
  ASSERT_TRUE(plan.has_value());
  // Window from offset 0 (A and the first hole); A goes to the last hole.
  EXPECT_EQ(plan->window.offset, 0u);
  EXPECT_EQ(plan->window.bytes, 4 * kPage);
  ASSERT_EQ(plan->moves.size(), 1u);
  EXPECT_EQ(plan->moves[0].from.offset, 0u);
  EXPECT_EQ(plan->moves[0].to.offset, 6 * kPage);
  EXPECT_EQ(plan->moved_bytes, 2 * kPage);
}

TEST(PlanCompactionTest, PrefersTheWindowWithFewerBytesToMove) {
  // B B B _ _ D _ _ : moving D (1 page) clears pages 3..7 for 4 pages.
  Arena a(8, {3, 2, 1, 2}, {1, 3});
  std::optional<Compaction> plan =
      PlanCompaction(a.arena, {{a.extents[0]}, {a.extents[2]}}, 4 * kPage);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->window.offset, 3 * kPage);
  ASSERT_EQ(plan->moves.size(), 1u);
  EXPECT_EQ(plan->moves[0].from.offset, 5 * kPage);
  EXPECT_EQ(plan->moved_bytes, kPage);
  // D's target lies outside the window, in free space.
  const uint64_t to = plan->moves[0].to.offset;
  EXPECT_TRUE(to + kPage <= plan->window.offset ||
              to >= plan->window.offset + plan->window.bytes);
}

TEST(PlanCompactionTest, PinnedExtentsAreNeverMovedOrSpanned) {
  Arena a(8, {2, 2, 2, 2}, {1, 3});
  // Nothing movable: no window of 4 free pages exists.
  EXPECT_FALSE(PlanCompaction(a.arena, {}, 4 * kPage).has_value());
  // Only C movable: the window cannot span A; it is pages 2..5 (the first
  // hole and C), and C goes to the last hole.
  std::optional<Compaction> plan =
      PlanCompaction(a.arena, {{a.extents[2]}}, 4 * kPage);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->window.offset, 2 * kPage);
  ASSERT_EQ(plan->moves.size(), 1u);
  EXPECT_EQ(plan->moves[0].from.offset, 4 * kPage);
  EXPECT_EQ(plan->moves[0].to.offset, 6 * kPage);
}

TEST(PlanCompactionTest, NoPlanWhenItFitsAlreadyOrTheBytesAreShort) {
  Arena a(8, {2, 2, 2, 2}, {1, 3});
  // 2 pages fit in a hole as they are.
  EXPECT_FALSE(
      PlanCompaction(a.arena, {{a.extents[0]}, {a.extents[2]}}, 2 * kPage)
          .has_value());
  // 5 pages are more than the 4 free.
  EXPECT_FALSE(
      PlanCompaction(a.arena, {{a.extents[0]}, {a.extents[2]}}, 5 * kPage)
          .has_value());
}

TEST(PlanCompactionTest, NoPlanWhenTheMovedExtentFindsNoRoomOutside) {
  // A A _ C C _ : 2 free pages in two 1-page holes; whichever 2-page extent
  // the window holds has only a 1-page hole outside it.
  Arena a(6, {2, 1, 2, 1}, {1, 3});
  EXPECT_FALSE(
      PlanCompaction(a.arena, {{a.extents[0]}, {a.extents[2]}}, 2 * kPage)
          .has_value());
}

TEST(ExtentAllocatorTest, AllocateAtTakesExactlyAFreeRange) {
  ExtentAllocator arena(8 * kPage, kPage);
  const Extent first = *arena.Allocate(2 * kPage, Placement::kLow);
  EXPECT_TRUE(arena.AllocateAt({4 * kPage, 2 * kPage}));
  EXPECT_EQ(arena.used_bytes(), 4 * kPage);
  // Left: [2, 4) and [6, 8).
  EXPECT_EQ(arena.free_ranges().size(), 2u);
  EXPECT_EQ(arena.free_ranges().at(2 * kPage), 2 * kPage);
  EXPECT_EQ(arena.free_ranges().at(6 * kPage), 2 * kPage);
  // Overlapping an allocated extent, misaligned or empty: refused, no change.
  EXPECT_FALSE(arena.AllocateAt({first.offset + kPage, 2 * kPage}));
  EXPECT_FALSE(arena.AllocateAt({3 * kPage, 2 * kPage}));
  EXPECT_FALSE(arena.AllocateAt({2 * kPage + 1, kPage}));
  EXPECT_FALSE(arena.AllocateAt({2 * kPage, 0}));
  EXPECT_EQ(arena.used_bytes(), 4 * kPage);
  arena.Free({4 * kPage, 2 * kPage});
  EXPECT_EQ(arena.free_ranges().at(2 * kPage), 6 * kPage);
}

// Four 1 MiB tensors written on `tier` (t<i> holds Pattern(kMiB, i)), the
// second and fourth then discarded: 2 MiB free on the tier, in two pieces.
void SplitTier(Store& s, Tier tier, std::vector<TensorId>* ids) {
  for (int i = 0; i < 4; ++i) {
    auto id = s.Create({.name = "t" + std::to_string(i), .size_bytes = kMiB});
    ASSERT_TRUE(id.ok()) << id.status();
    auto lease = s.Acquire(*id, tier, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ::strata::testing::FillPattern(lease->data(), kMiB, i);
    ids->push_back(*id);
  }
  ASSERT_TRUE(s.Discard((*ids)[1]).ok());
  ASSERT_TRUE(s.Discard((*ids)[3]).ok());
}

// A new 2 MiB tensor acquired on `tier` (overwrite), then released.
void AcquireTwoMiB(Store& s, Tier tier) {
  auto big = s.Create({.name = "big", .size_bytes = 2 * kMiB});
  ASSERT_TRUE(big.ok()) << big.status();
  auto lease = s.Acquire(*big, tier, Access::kOverwrite);
  ASSERT_TRUE(lease.ok()) << lease.status();
}

// The store: a 4 MiB host tier holds four 1 MiB copies; two are discarded,
// leaving 2 MiB free in two pieces. A 2 MiB tensor acquired on the host
// then moves one idle copy rather than writing one back to NVMe.
TEST(StoreCompactionTest, AFragmentedTierMovesACopyInsteadOfEvictingIt) {
  ::strata::testing::TempDir dir;
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir.path(), 4 * kMiB,
                                                        4 * kMiB, 64 * kMiB);
  o.scheduler.prefetch = false;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  Store& s = **store;
  std::vector<TensorId> ids;
  ASSERT_NO_FATAL_FAILURE(SplitTier(s, Tier::kHost, &ids));
  const Stats before = s.GetStats();
  ASSERT_EQ(before.tiers[1].used_bytes, 2 * kMiB);

  ASSERT_NO_FATAL_FAILURE(AcquireTwoMiB(s, Tier::kHost));
  const Stats after = s.GetStats();
  EXPECT_EQ(after.tiers[1].compactions, before.tiers[1].compactions + 1);
  EXPECT_EQ(after.tiers[1].relocated_bytes,
            before.tiers[1].relocated_bytes + kMiB);
  EXPECT_EQ(after.tiers[1].evictions, before.tiers[1].evictions);
  EXPECT_EQ(after.links[static_cast<int>(Link::kNvmeWrite)].bytes,
            before.links[static_cast<int>(Link::kNvmeWrite)].bytes);
  // Both survivors still hold their bytes, on the host.
  for (int i : {0, 2}) {
    auto lease = s.Acquire(ids[i], Tier::kHost, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_EQ(std::memcmp(lease->data(),
                          ::strata::testing::Pattern(kMiB, i).data(), kMiB),
              0)
        << "t" << i;
  }
  EXPECT_EQ(s.GetStats().links[static_cast<int>(Link::kNvmeRead)].bytes,
            before.links[static_cast<int>(Link::kNvmeRead)].bytes);
}

// The device tier, with the move failing: the copy stays where it was,
// whole, and the store evicts instead (a write-back to the host).
TEST(StoreCompactionTest, AFailedMoveLeavesTheCopyAndEvictsInstead) {
  ::strata::testing::TempDir dir;
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir.path(), 4 * kMiB,
                                                        8 * kMiB, 64 * kMiB);
  o.scheduler.prefetch = false;
  FaultyDevice* device = nullptr;
  auto store = OpenStore(o, ::strata::testing::FaultyDeviceSeams(&device));
  ASSERT_TRUE(store.ok()) << store.status();
  Store& s = **store;
  std::vector<TensorId> ids;
  ASSERT_NO_FATAL_FAILURE(SplitTier(s, Tier::kDevice, &ids));
  device->set_spec(
      {.nth = 1, .ops = FaultOps::kD2D, .kind = FaultKind::kTornCopy});
  const Stats before = s.GetStats();
  ASSERT_NO_FATAL_FAILURE(AcquireTwoMiB(s, Tier::kDevice));
  EXPECT_EQ(device->injected(), 1u);
  const Stats after = s.GetStats();
  EXPECT_EQ(after.tiers[0].compactions, before.tiers[0].compactions);
  EXPECT_EQ(after.tiers[0].relocated_bytes, before.tiers[0].relocated_bytes);
  EXPECT_GT(after.write_backs, before.write_backs);
  for (int i : {0, 2}) {
    std::vector<std::byte> back(kMiB);
    ASSERT_TRUE(s.Read(ids[i], back.data(), kMiB).ok());
    EXPECT_TRUE(::strata::testing::MatchesPattern(back.data(), kMiB, i))
        << "t" << i;
  }
}

}  // namespace
}  // namespace strata
