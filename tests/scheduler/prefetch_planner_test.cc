// Unit tests for the scheduler's prefetch planner
// (scheduler/prefetch_planner.h) on hand-built predictions and tensor facts,
// with no Store: trace order, the byte window per tier (copies already there
// count; a tier stops at the first access that does not fit), each rule
// that skips a load, and the timing rule (a load starts as late as its link
// allows, given the loads queued before it).
#include "scheduler/prefetch_planner.h"

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "strata/options.h"
#include "strata/stats.h"

namespace strata {
namespace {

AccessEvent Read(uint64_t id, Tier tier = Tier::kDevice) {
  return {TensorId{id}, tier, Access::kRead};
}
AccessEvent Write(uint64_t id, Tier tier = Tier::kDevice) {
  return {TensorId{id}, tier, Access::kWrite};
}
AccessEvent Overwrite(uint64_t id, Tier tier = Tier::kDevice) {
  return {TensorId{id}, tier, Access::kOverwrite};
}
PrefetchRequest Load(uint64_t id, Tier tier = Tier::kDevice) {
  return {TensorId{id}, tier};
}

// Tensors the store would report: by default 1 MiB on every tier, home
// NVMe, with contents, absent everywhere.
class Facts {
 public:
  PrefetchFacts& operator[](uint64_t id) {
    auto it = facts_.find(id);
    if (it == facts_.end()) {
      it = facts_
               .emplace(id, PrefetchFacts{.bytes = kMiB,
                                          .home = Tier::kNvme,
                                          .has_contents = true,
                                          .loadable = true})
               .first;
    }
    return it->second;
  }
  // Tensor `id` is already on (or coming to) `tier`.
  void Present(uint64_t id, Tier tier) { present_[{id, tier}] = true; }
  // A load of `id` to `tier` would come over `link`.
  void LinkOn(uint64_t id, Tier tier, Link link) {
    (*this)[id];
    links_[{id, tier}] = static_cast<int>(link);
  }
  std::optional<PrefetchFacts> Lookup(TensorId id, Tier tier) const {
    auto it = facts_.find(id.value);
    if (it == facts_.end()) return std::nullopt;
    PrefetchFacts f = it->second;
    if (present_.contains({id.value, tier})) f.loadable = false;
    if (auto l = links_.find({id.value, tier}); l != links_.end()) {
      f.link = l->second;
    }
    return f;
  }

 private:
  absl::flat_hash_map<uint64_t, PrefetchFacts> facts_;
  absl::flat_hash_map<std::pair<uint64_t, Tier>, bool> present_;
  absl::flat_hash_map<std::pair<uint64_t, Tier>, int> links_;
};

std::vector<PrefetchRequest> Plan(const std::vector<AccessEvent>& upcoming,
                                  const Facts& facts, uint64_t device_bytes,
                                  uint64_t host_bytes = 64 * kMiB) {
  const uint64_t limits[kNumTiers] = {device_bytes, host_bytes, 0};
  return PlanPrefetch(upcoming, limits, [&facts](TensorId id, Tier tier) {
    return facts.Lookup(id, tier);
  });
}

TEST(PrefetchPlannerTest, NoPredictionPlansNothing) {
  Facts f;
  EXPECT_TRUE(Plan({}, f, 64 * kMiB).empty());
}

TEST(PrefetchPlannerTest, PlansInTraceOrder) {
  Facts f;
  for (uint64_t id : {1, 2, 3}) f[id];
  EXPECT_EQ(Plan({Read(3), Read(1), Read(2)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(3), Load(1), Load(2)}));
}

TEST(PrefetchPlannerTest, WindowStopsATierAtTheFirstAccessThatDoesNotFit) {
  Facts f;
  f[1].bytes = 2 * kMiB;
  f[2].bytes = 2 * kMiB;
  f[3].bytes = kMiB;  // would fit after 2, but nearer accesses come first
  EXPECT_EQ(Plan({Read(1), Read(2), Read(3)}, f, 3 * kMiB),
            (std::vector<PrefetchRequest>{Load(1)}));
  // Exactly full is inside the window.
  EXPECT_EQ(Plan({Read(1), Read(2)}, f, 4 * kMiB),
            (std::vector<PrefetchRequest>{Load(1), Load(2)}));
}

TEST(PrefetchPlannerTest, CopiesAlreadyThereCountInTheWindow) {
  Facts f;
  for (uint64_t id : {1, 2, 3}) f[id];
  f.Present(1, Tier::kDevice);
  EXPECT_EQ(Plan({Read(1), Read(2), Read(3)}, f, 2 * kMiB),
            (std::vector<PrefetchRequest>{Load(2)}));
}

TEST(PrefetchPlannerTest, RepeatedAccessesCountEachTimeAndLoadOnce) {
  Facts f;
  for (uint64_t id : {1, 2}) f[id];
  EXPECT_EQ(Plan({Read(1), Read(1), Read(2)}, f, 3 * kMiB),
            (std::vector<PrefetchRequest>{Load(1), Load(2)}));
  EXPECT_EQ(Plan({Read(1), Read(1), Read(2)}, f, 2 * kMiB),
            (std::vector<PrefetchRequest>{Load(1)}));
}

TEST(PrefetchPlannerTest, TiersHaveTheirOwnWindows) {
  Facts f;
  for (uint64_t id : {1, 2, 3}) f[id];
  // The device window is full after 1; the host's still takes 3.
  EXPECT_EQ(Plan({Read(1), Read(2), Read(3, Tier::kHost)}, f, kMiB, kMiB),
            (std::vector<PrefetchRequest>{Load(1), Load(3, Tier::kHost)}));
}

TEST(PrefetchPlannerTest, SkippedAccessesStillChargeTheWindow) {
  Facts f;
  for (uint64_t id : {1, 2, 3, 4}) f[id];
  f[2].has_contents = false;
  // 1: overwrite, 2: no contents; both charge the window, so 4 does not fit.
  EXPECT_EQ(Plan({Overwrite(1), Read(2), Read(3), Read(4)}, f, 3 * kMiB),
            (std::vector<PrefetchRequest>{Load(3)}));
}

TEST(PrefetchPlannerTest, NeverPlansNvmeOrTiersBelowHome) {
  Facts f;
  f[1].home = Tier::kHost;
  f[2].home = Tier::kDevice;
  f[3];
  EXPECT_EQ(Plan({Read(1, Tier::kNvme), Read(2, Tier::kHost), Read(1),
                  Read(3, Tier::kHost)},
                 f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(1), Load(3, Tier::kHost)}));
  // NVMe accesses charge nothing: a zero NVMe window stops nothing.
  EXPECT_EQ(Plan({Read(3, Tier::kNvme), Read(3)}, f, kMiB),
            (std::vector<PrefetchRequest>{Load(3)}));
}

TEST(PrefetchPlannerTest, UnknownTensorsAreSkippedAndChargeNothing) {
  Facts f;
  f[2];
  EXPECT_EQ(Plan({Read(7), Read(2)}, f, kMiB),
            (std::vector<PrefetchRequest>{Load(2)}));
}

TEST(PrefetchPlannerTest, CopiesThereOrComingAreNotLoadedAgain) {
  Facts f;
  f[1];
  f[2];
  f.Present(1, Tier::kDevice);
  EXPECT_EQ(Plan({Read(1), Read(2), Read(1, Tier::kHost)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(2), Load(1, Tier::kHost)}));
}

// A predicted write of a tensor on one tier makes a later prefetch of it to
// another tier stale by its use; on the same tier it is fine.
TEST(PrefetchPlannerTest, EarlierWriteOnAnotherTierMakesALoadStale) {
  Facts f;
  f[1];
  f[2];
  EXPECT_EQ(
      Plan({Write(1, Tier::kHost), Read(1), Write(2), Read(2)}, f, 64 * kMiB),
      (std::vector<PrefetchRequest>{Load(1, Tier::kHost), Load(2)}));
  // An overwrite counts as a write; a read does not.
  EXPECT_EQ(
      Plan({Read(2, Tier::kHost), Overwrite(1, Tier::kHost), Read(1), Read(2)},
           f, 64 * kMiB),
      (std::vector<PrefetchRequest>{Load(2, Tier::kHost), Load(2)}));
  // The latest write decides: written on the host, then on the device.
  EXPECT_EQ(Plan({Write(2, Tier::kHost), Write(2), Read(2)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(2, Tier::kHost), Load(2)}));
}

// A host copy that would come from NVMe waits while a device access of the
// tensor comes first: that access brings a device copy, which then feeds the
// host over D2H (a host optimizer's weight, read on the device by the
// backward pass just before) instead of a second NVMe read.
TEST(PrefetchPlannerTest, AHostLoadWaitsForTheDeviceCopyAnEarlierAccessBrings) {
  Facts f;
  f.LinkOn(1, Tier::kDevice, Link::kNvmeRead);
  f.LinkOn(1, Tier::kHost, Link::kNvmeRead);
  EXPECT_EQ(Plan({Read(1), Write(1, Tier::kHost)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(1)}));
  // No device access before it: from NVMe, as any load.
  EXPECT_EQ(Plan({Write(1, Tier::kHost), Read(1, Tier::kHost)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(1, Tier::kHost)}));
  // The device copy is there: the host copy comes over D2H, planned now.
  f.Present(1, Tier::kDevice);
  f.LinkOn(1, Tier::kHost, Link::kD2H);
  EXPECT_EQ(Plan({Read(1), Write(1, Tier::kHost)}, f, 64 * kMiB),
            (std::vector<PrefetchRequest>{Load(1, Tier::kHost)}));
}

// Writes are remembered even for accesses the window no longer plans.
TEST(PrefetchPlannerTest, WritesBeyondAFullTierStillMakeLoadsStale) {
  Facts f;
  f[1].bytes = 4 * kMiB;
  f[2];
  EXPECT_EQ(Plan({Read(1), Write(2), Read(2, Tier::kHost)}, f, kMiB),
            (std::vector<PrefetchRequest>{}));
}

// The timing rule on one link of 1 MiB per second: every test tensor's load
// takes one second.
std::vector<PrefetchRequest> PlanTimed(const std::vector<AccessEvent>& upcoming,
                                       const std::vector<double>& seconds,
                                       Facts& facts) {
  for (const AccessEvent& e : upcoming) facts[e.id.value].transfer_seconds = 1;
  const uint64_t limits[kNumTiers] = {64 * kMiB, 64 * kMiB, 0};
  return PlanPrefetch(
      upcoming, limits,
      [&facts](TensorId id, Tier tier) { return facts.Lookup(id, tier); },
      seconds);
}

// Tensor 2's access is 5 s away and its load takes 1 s: with the next access
// (the next chance to plan) 1 s away it waits, and it starts once the time
// left reaches its transfer time.
TEST(PrefetchPlannerTest, AFarLoadWaitsUntilTheTimeLeftIsItsTransferTime) {
  Facts f;
  f.Present(1, Tier::kDevice);
  EXPECT_EQ(PlanTimed({Read(1), Read(2)}, {1, 5}, f),
            (std::vector<PrefetchRequest>{}));
  EXPECT_EQ(PlanTimed({Read(1), Read(2)}, {1, 2.5}, f),
            (std::vector<PrefetchRequest>{}));
  EXPECT_EQ(PlanTimed({Read(1), Read(2)}, {1, 2}, f),
            (std::vector<PrefetchRequest>{Load(2)}));
}

// Loads on one link queue. Alone, tensor 2 (needed at 3.5 s) could start by
// 2.5 s and wait; tensor 3 behind it (needed at 4 s) must start by 3 s, so
// tensor 2 must start by 2 s: at the next chance to plan, so now. Tensor 3
// itself still waits.
TEST(PrefetchPlannerTest, ALaterLoadOnTheLinkPullsTheNearerOneForward) {
  Facts f;
  f.Present(1, Tier::kDevice);
  EXPECT_EQ(PlanTimed({Read(1), Read(2), Read(3)}, {2, 3.5, 4}, f),
            (std::vector<PrefetchRequest>{Load(2)}));
  // On another link tensor 3 leaves tensor 2 alone.
  f[3].link = 1;
  EXPECT_EQ(PlanTimed({Read(1), Read(2), Read(3)}, {2, 3.5, 4}, f),
            (std::vector<PrefetchRequest>{}));
}

// A load in flight goes first on its link: tensor 3 (latest start 2 s, next
// chance 1 s) would wait, but behind a second of tensor 2's load it starts
// now; tensor 2 is not planned again.
TEST(PrefetchPlannerTest, ALoadInFlightMakesTheLoadsOnItsLinkStartSooner) {
  Facts f;
  f.Present(1, Tier::kDevice);
  f[2].loadable = false;
  f[2].in_flight = true;
  EXPECT_EQ(PlanTimed({Read(1), Read(2), Read(3)}, {1, 3, 3}, f),
            (std::vector<PrefetchRequest>{Load(3)}));
  f[2].in_flight = false;  // there already: tensor 3 can wait
  EXPECT_EQ(PlanTimed({Read(1), Read(2), Read(3)}, {1, 3, 3}, f),
            (std::vector<PrefetchRequest>{}));
}

// A link whose throughput is not known yet makes its loads urgent.
TEST(PrefetchPlannerTest, AnUnknownTransferTimeStartsTheLoadAtOnce) {
  Facts f;
  f.Present(1, Tier::kDevice);
  f[2];
  const uint64_t limits[kNumTiers] = {64 * kMiB, 64 * kMiB, 0};
  f[2].transfer_seconds = std::numeric_limits<double>::infinity();
  EXPECT_EQ(PlanPrefetch(
                {Read(1), Read(2)}, limits,
                [&f](TensorId id, Tier tier) { return f.Lookup(id, tier); },
                std::vector<double>{1, 100}),
            (std::vector<PrefetchRequest>{Load(2)}));
}

}  // namespace
}  // namespace strata
