// Unit tests for the scheduler's eviction policy (scheduler/eviction.h) on
// hand-built snapshots, with no Store: Belady's furthest next use, clean
// before dirty at equal distance, LRU at equal distance and cleanliness, the
// LRU baseline, every rule that rules a copy out, protection, and ties.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "scheduler/eviction.h"
#include "scheduler/snapshot.h"

namespace strata {
namespace {

// A valid, clean, unleased cache copy on the device, of tensor `id`.
CopyView Cached(uint64_t id, uint64_t next_use, uint64_t last_use) {
  CopyView c;
  c.id = TensorId{id};
  c.tier = Tier::kDevice;
  c.bytes = 4096;
  c.state = CopyState::kValid;
  c.has_contents = true;
  c.home.state = CopyState::kValid;
  c.next_use = next_use;
  c.last_use = last_use;
  return c;
}

// The same copy, dirty: the only valid copy, its home copy absent.
CopyView Dirty(uint64_t id, uint64_t next_use, uint64_t last_use) {
  CopyView c = Cached(id, next_use, last_use);
  c.dirty = true;
  c.home.state = CopyState::kAbsent;
  return c;
}

EvictionQuery Belady(Tier tier = Tier::kDevice, uint64_t protect_within = 0) {
  return {.tier = tier,
          .policy = EvictionPolicy::kBelady,
          .protect_within = protect_within};
}
EvictionQuery Lru(Tier tier = Tier::kDevice) {
  return {.tier = tier, .policy = EvictionPolicy::kLru};
}

TEST(EvictionPolicyTest, EmptySnapshotHasNoVictim) {
  EXPECT_EQ(PickVictim({}, Belady()), std::nullopt);
  EXPECT_EQ(PickVictim({}, Lru()), std::nullopt);
}

TEST(EvictionPolicyTest, BeladyTakesTheFurthestNextUse) {
  const std::vector<CopyView> copies = {Cached(1, 3, 10), Cached(2, 7, 20),
                                        Cached(3, 1, 5)};
  EXPECT_EQ(PickVictim(copies, Belady()), 1u);
}

// keep_small_below: a small copy goes only when no larger one can; among
// the larger ones Belady's order holds, and with nothing else the small copy
// is still a victim.
TEST(EvictionPolicyTest, SmallCopiesGoLast) {
  CopyView small = Cached(1, kNoPredictedUse, 1);
  CopyView near_large = Cached(2, 3, 2);
  near_large.bytes = 256 * 1024;
  CopyView far_large = Cached(3, 9, 3);
  far_large.bytes = 64 * 1024;  // exactly the threshold: not small
  EvictionQuery query = Belady();
  query.keep_small_below = 64 * 1024;
  EXPECT_EQ(PickVictim({small, near_large, far_large}, query), 2u);
  EXPECT_EQ(PickVictim({small, near_large}, query), 1u);
  EXPECT_EQ(PickVictim({small}, query), 0u);
  // Without the preference, Belady takes the small copy (no predicted use).
  EXPECT_EQ(PickVictim({small, near_large, far_large}, Belady()), 0u);
}

// BetterVictim is PickVictim's order: a further next use wins, except that
// a small copy kept on the tier loses to any larger one.
TEST(EvictionPolicyTest, BetterVictimIsThePickOrder) {
  CopyView small_far = Cached(1, 100, 1);
  CopyView large_near = Cached(2, 5, 2);
  large_near.bytes = 256 * 1024;
  EvictionQuery query = Belady();
  EXPECT_TRUE(BetterVictim(small_far, large_near, query));
  EXPECT_FALSE(BetterVictim(large_near, small_far, query));
  query.keep_small_below = 64 * 1024;
  EXPECT_FALSE(BetterVictim(small_far, large_near, query));
  EXPECT_TRUE(BetterVictim(large_near, small_far, query));
  EXPECT_EQ(PickVictim({small_far, large_near}, query), 1u);
  // Equal keys: neither is better (PickVictim keeps the earlier one).
  EXPECT_FALSE(BetterVictim(large_near, large_near, query));
}

TEST(EvictionPolicyTest, NoPredictedUseIsFurthest) {
  const std::vector<CopyView> copies = {
      Cached(1, 1000000, 1), Cached(2, kNoPredictedUse, 50), Cached(3, 2, 0)};
  EXPECT_EQ(PickVictim(copies, Belady()), 1u);
}

TEST(EvictionPolicyTest, BeladyPrefersCleanAtEqualDistance) {
  // Dirty copy 1 is older, but the clean copy 2 costs no write-back.
  const std::vector<CopyView> copies = {Dirty(1, 5, 1), Cached(2, 5, 9)};
  EXPECT_EQ(PickVictim(copies, Belady()), 1u);
  // A dirty copy further away still beats a nearer clean one.
  const std::vector<CopyView> further = {Dirty(1, 6, 1), Cached(2, 5, 9)};
  EXPECT_EQ(PickVictim(further, Belady()), 0u);
}

TEST(EvictionPolicyTest, BeladyBreaksTiesByLeastRecentUse) {
  const std::vector<CopyView> copies = {Cached(1, 5, 30), Cached(2, 5, 10),
                                        Cached(3, 5, 20)};
  EXPECT_EQ(PickVictim(copies, Belady()), 1u);
  const std::vector<CopyView> dirty = {Dirty(1, 5, 30), Dirty(2, 5, 10)};
  EXPECT_EQ(PickVictim(dirty, Belady()), 1u);
}

TEST(EvictionPolicyTest, EqualKeysKeepTheEarlierCopy) {
  const std::vector<CopyView> copies = {Cached(1, 5, 10), Cached(2, 5, 10)};
  EXPECT_EQ(PickVictim(copies, Belady()), 0u);
  EXPECT_EQ(PickVictim(copies, Lru()), 0u);
}

TEST(EvictionPolicyTest, LruIgnoresThePrediction) {
  // Copy 0 is needed furthest ahead, copy 1 is the least recently used.
  const std::vector<CopyView> copies = {Cached(1, 100, 20), Cached(2, 1, 10),
                                        Cached(3, 50, 30)};
  EXPECT_EQ(PickVictim(copies, Lru()), 1u);
  EXPECT_EQ(PickVictim(copies, Belady()), 0u);
}

TEST(EvictionPolicyTest, LruPrefersCleanThenOldest) {
  const std::vector<CopyView> copies = {Dirty(1, 9, 1), Cached(2, 9, 40),
                                        Cached(3, 9, 30)};
  EXPECT_EQ(PickVictim(copies, Lru()), 2u);
}

// Each rule that rules a copy out, on a copy that would otherwise win.
TEST(EvictionPolicyTest, SkipsCopiesThatCannotBeEvicted) {
  const CopyView fallback = Cached(9, 1, 100);
  auto pick_with = [&](CopyView best) {
    return PickVictim(std::vector<CopyView>{best, fallback}, Belady());
  };
  CopyView c = Cached(1, kNoPredictedUse, 0);
  ASSERT_EQ(pick_with(c), 0u);

  CopyView leased = c;
  leased.leased = true;
  EXPECT_EQ(pick_with(leased), 1u) << "leased";
  CopyView pinned = c;
  pinned.transfer_pinned = true;
  EXPECT_EQ(pick_with(pinned), 1u) << "a transfer reads it";
  CopyView awaited = c;  // its next use looks furthest: already observed
  awaited.awaited = true;
  EXPECT_EQ(pick_with(awaited), 1u) << "an acquire waits for it";
  CopyView home = c;
  home.is_home = true;
  EXPECT_EQ(pick_with(home), 1u) << "home copy";
  for (CopyState s :
       {CopyState::kAbsent, CopyState::kLoading, CopyState::kEvicting}) {
    CopyView not_valid = c;
    not_valid.state = s;
    EXPECT_EQ(pick_with(not_valid), 1u) << "state " << static_cast<int>(s);
  }
  CopyView other_tier = c;
  other_tier.tier = Tier::kHost;
  EXPECT_EQ(pick_with(other_tier), 1u) << "another tier's copy";
}

// A dirty copy whose home copy is not absent (a transfer is filling it) has
// nowhere to be written back yet.
TEST(EvictionPolicyTest, SkipsDirtyCopyWhoseHomeIsBeingFilled) {
  const CopyView fallback = Cached(9, 1, 100);
  for (CopyState home :
       {CopyState::kLoading, CopyState::kValid, CopyState::kEvicting}) {
    CopyView d = Dirty(1, kNoPredictedUse, 0);
    d.home.state = home;
    EXPECT_EQ(PickVictim(std::vector<CopyView>{d, fallback}, Belady()), 1u)
        << "home state " << static_cast<int>(home);
  }
  // Home absent: evictable (written back there).
  CopyView d = Dirty(1, kNoPredictedUse, 0);
  EXPECT_EQ(PickVictim(std::vector<CopyView>{d, fallback}, Belady()), 0u);
  // Without contents nothing is written back, so the home does not matter.
  d.has_contents = false;
  d.home.state = CopyState::kLoading;
  EXPECT_EQ(PickVictim(std::vector<CopyView>{d, fallback}, Belady()), 0u);
}

TEST(EvictionPolicyTest, ProtectsCopiesNeededSooner) {
  const std::vector<CopyView> copies = {Cached(1, 2, 1), Cached(2, 4, 3),
                                        Cached(3, 3, 2)};
  EXPECT_EQ(PickVictim(copies, Belady(Tier::kDevice, 3)), 1u);
  // The boundary: a next use equal to protect_within is not protected.
  EXPECT_EQ(PickVictim(copies, Belady(Tier::kDevice, 4)), 1u);
  EXPECT_EQ(PickVictim(copies, Belady(Tier::kDevice, 5)), std::nullopt);
  // Protection applies to LRU too (whatever the caller asks).
  EvictionQuery lru = Lru();
  lru.protect_within = 3;
  EXPECT_EQ(PickVictim(copies, lru), 2u);
  // 0 protects nothing, even a copy needed next.
  const std::vector<CopyView> next = {Cached(1, 0, 1)};
  EXPECT_EQ(PickVictim(next, Belady(Tier::kDevice, 0)), 0u);
}

TEST(EvictionPolicyTest, UnifiedHostCopyStaysWhileTheDeviceUsesItsPages) {
  CopyView host = Cached(1, kNoPredictedUse, 0);
  host.tier = Tier::kHost;
  CopyView fallback = Cached(9, 1, 100);
  fallback.tier = Tier::kHost;
  EvictionQuery q = Belady(Tier::kHost);
  q.unified = true;
  auto pick_with = [&](PeerView device, bool unified) {
    CopyView h = host;
    h.device = device;
    EvictionQuery query = q;
    query.unified = unified;
    return PickVictim(std::vector<CopyView>{h, fallback}, query);
  };
  // Device copy absent or valid and idle: the host copy may go (the store
  // ends the device residency first).
  EXPECT_EQ(pick_with({}, true), 0u);
  EXPECT_EQ(pick_with({.state = CopyState::kValid}, true), 0u);
  // Being filled, migrating back, leased or read: it stays.
  EXPECT_EQ(pick_with({.state = CopyState::kLoading}, true), 1u);
  EXPECT_EQ(pick_with({.state = CopyState::kEvicting}, true), 1u);
  EXPECT_EQ(pick_with({.state = CopyState::kValid, .leased = true}, true), 1u);
  EXPECT_EQ(
      pick_with({.state = CopyState::kValid, .transfer_pinned = true}, true),
      1u);
  // With explicit copies the device copy is separate memory.
  EXPECT_EQ(pick_with({.state = CopyState::kLoading}, false), 0u);
  // The rule is about host copies only.
  CopyView dev = Cached(1, kNoPredictedUse, 0);
  dev.device = {.state = CopyState::kLoading};
  EvictionQuery on_device = Belady(Tier::kDevice);
  on_device.unified = true;
  EXPECT_EQ(PickVictim(std::vector<CopyView>{dev}, on_device), 0u);
}

TEST(EvictionPolicyTest, NothingEvictableGivesNullopt) {
  CopyView leased = Cached(1, 5, 1);
  leased.leased = true;
  CopyView home = Cached(2, 5, 1);
  home.is_home = true;
  EXPECT_EQ(PickVictim(std::vector<CopyView>{leased, home}, Belady()),
            std::nullopt);
  EXPECT_FALSE(IsEvictable(leased, Belady()));
  EXPECT_TRUE(IsEvictable(Cached(3, 5, 1), Belady()));
}

}  // namespace
}  // namespace strata
