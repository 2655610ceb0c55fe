// Unit tests for NvmeFloorBytes (scheduler/nvme_floor.h) on hand-built
// steps whose floors can be worked out by hand: the fullest point, a
// shortfall at every position (where the floor counts each position's
// eviction, not only the fullest one's), writes per dirty version, clean
// contents that evict for free, leases counted once, and homes; and the
// edges: one-access steps, zero-byte tensors, dead and kept contents,
// NVMe-tier reads, budgets past INT64_MAX, leases alone past the budgets.
#include "scheduler/nvme_floor.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace strata {
namespace {

class Step {
 public:
  uint32_t Tensor(uint64_t bytes, Tier home = Tier::kNvme) {
    in_.tensors.push_back(
        {.bytes = bytes, .tier_bytes = {bytes, bytes, bytes}, .home = home});
    return static_cast<uint32_t>(in_.tensors.size() - 1);
  }
  // An acquire on the device held for `held` acquires; dies_at as given.
  Step& Use(uint32_t t, Access access, uint32_t held = 1,
            uint32_t dies_at = PlanAccess::kDiesAtRelease,
            Tier tier = Tier::kDevice) {
    const auto p = static_cast<uint32_t>(in_.accesses.size());
    in_.accesses.push_back({.tensor = t,
                            .tier = tier,
                            .access = access,
                            .hold_end = p + held,
                            .dies_at = dies_at});
    return *this;
  }
  NvmeFloors Floors(uint64_t device, uint64_t host = 0) {
    in_.capacity = {device, host, 0};
    return NvmeFloorBytes(in_);
  }

 private:
  PlanInput in_;
};

// A weight (10 bytes) read in forward and written by the optimizer is live
// all step; an activation (5) overwritten in forward and read in backward
// is live only until that read. The fullest point (position 2: the weight
// waits, the activation is read) holds 15 bytes; elsewhere 10 or fewer.
TEST(NvmeFloorTest, TheFullestPointLessWhatFitsAboveNvme) {
  const auto floors = [](uint64_t device, uint64_t host) {
    Step s;
    const uint32_t w = s.Tensor(10), a = s.Tensor(5);
    s.Use(w, Access::kRead).Use(a, Access::kOverwrite).Use(a, Access::kRead);
    s.Use(w, Access::kWrite);
    return s.Floors(device, host);
  };
  EXPECT_EQ(floors(12, 0).read_bytes, 3u);
  EXPECT_EQ(floors(8, 4).read_bytes, 3u);  // device and host pooled
  EXPECT_EQ(floors(15, 0).read_bytes, 0u);
  // The activation is read right after its write and dies; the weight's
  // version is the only dirty contents that waits, and evicting 3 of its
  // bytes writes it.
  EXPECT_EQ(floors(12, 0).write_bytes, 3u);
  EXPECT_EQ(floors(15, 0).write_bytes, 0u);
}

// Two tensors of 10 bytes take turns in a budget that holds one: at every
// position the other waits on NVMe and is read back for its next use, so
// every access reads 10 bytes — four times the fullest point's shortfall.
// Neither is written: dropping a clean copy writes nothing.
TEST(NvmeFloorTest, AShortfallAtEveryPositionIsReadAtEveryPosition) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10);
  s.Use(a, Access::kRead).Use(b, Access::kRead);
  s.Use(a, Access::kRead).Use(b, Access::kRead);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 40u);
  EXPECT_EQ(f.write_bytes, 0u);
}

// Four tensors read in turn, one leased and three waiting, with room above
// NVMe for three: a byte kept on NVMe over a whole wait covers the
// shortfall at three positions, so the reads are at least 4/3 of it,
// above the fullest point's shortfall (4 x 3072 - 9216 = 3072).
TEST(NvmeFloorTest, AWaitEvictedCoversEveryPositionItSpans) {
  Step s;
  for (int i = 0; i < 4; ++i) s.Tensor(3072);
  for (uint32_t t = 0; t < 4; ++t) s.Use(t, Access::kRead);
  const NvmeFloors f = s.Floors(3 * 3072);
  EXPECT_LE(f.read_bytes, 4096u);
  EXPECT_GE(f.read_bytes, 4095u);  // short by at most crossing / copies
}

// A weight w written at position 2 and a clean tensor x: x evicts for free
// while w is leased, but while x is leased w waits and must go to NVMe —
// written once per version, however often it is read back.
TEST(NvmeFloorTest, ADirtyVersionIsWrittenOnceAndCleanContentsAreFree) {
  Step s;
  const uint32_t w = s.Tensor(10), x = s.Tensor(10);
  s.Use(w, Access::kRead).Use(x, Access::kRead);
  s.Use(w, Access::kWrite).Use(x, Access::kRead);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 40u);
  EXPECT_EQ(f.write_bytes, 10u);
}

// Contents kept after their last read until a discard need room or a
// write-back, never a read.
TEST(NvmeFloorTest, KeptContentsAreWrittenNeverRead) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10);
  // a is written and kept (until its overwrite) while b is used twice.
  s.Use(a, Access::kOverwrite, 1, PlanAccess::kKeptToOverwrite);
  s.Use(b, Access::kOverwrite).Use(b, Access::kRead);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 10u);
}

// A lease held across another acquire of the same tensor holds one copy:
// a (10) leased over positions 0..2 and again at 1, b (10) at 2. With 20
// bytes above NVMe, b fits beside a everywhere.
TEST(NvmeFloorTest, OverlappingLeasesOfATensorCountOnce) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10);
  s.Use(a, Access::kRead, 3).Use(a, Access::kRead).Use(b, Access::kRead);
  EXPECT_EQ(s.Floors(20).read_bytes, 0u);
  EXPECT_EQ(s.Floors(19).read_bytes, 1u);
}

// A home on the host is reserved all step and never goes to NVMe: what it
// takes of the budget, the NVMe-homed tensors cannot use.
TEST(NvmeFloorTest, AHomeAboveNvmeTakesItsBytesAllStep) {
  Step s;
  const uint32_t h = s.Tensor(6, Tier::kHost), a = s.Tensor(10);
  const uint32_t b = s.Tensor(10);
  s.Use(h, Access::kRead, 1, PlanAccess::kDiesAtRelease, Tier::kHost);
  s.Use(a, Access::kRead).Use(b, Access::kRead);
  // 26 bytes at every position: h's home 6, and a and b (10 each) leased
  // or waiting.
  EXPECT_EQ(s.Floors(26).read_bytes, 0u);
  // 2 short everywhere: b must give 2 where a is leased, a where b is, and
  // those 4 cover the position where both wait.
  EXPECT_EQ(s.Floors(24).read_bytes, 4u);
}

// A one-access step: the tensor is leased at its only position and its
// wait back to that use is empty (the lease is released right before the
// next step's acquire), so nothing ever waits and nothing is read or
// written, however the sweep unrolls a step of one position (4,096 copies).
TEST(NvmeFloorTest, AOneAccessStepHasNothingWaiting) {
  Step s;
  const uint32_t a = s.Tensor(10);
  s.Use(a, Access::kWrite);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

// Every lease held to the step's end: at the last position every tensor
// used is leased (a twice, one copy), and at every other one each is
// either leased or waiting out its wrap-around gap, which starts at the
// step's end (after all of its tensor's leases). So 30 bytes sit above
// NVMe everywhere: a budget of 30 needs nothing from NVMe, though a and c
// are written, and a wait counted beside its own tensor's lease (or a's
// two leases counted twice) would show.
TEST(NvmeFloorTest, LeasesHeldToTheStepsEndAndTheirWrapAroundWaits) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10), c = s.Tensor(10);
  s.Use(a, Access::kRead, 4).Use(b, Access::kRead, 3);
  s.Use(a, Access::kWrite, 2).Use(c, Access::kWrite, 1);
  const NvmeFloors f = s.Floors(30);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

// Tensors of no bytes (each with a wait that outlasts the others') add no
// load and no room: the floors of the two tensors taking turns are the
// same 40 bytes read with them as without.
TEST(NvmeFloorTest, ZeroByteTensorsChangeNothing) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10);
  const uint32_t z = s.Tensor(0), y = s.Tensor(0);
  s.Use(z, Access::kWrite).Use(a, Access::kRead).Use(b, Access::kRead);
  s.Use(y, Access::kWrite).Use(a, Access::kRead).Use(b, Access::kRead);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 40u);
  EXPECT_EQ(f.write_bytes, 0u);
}

// Contents the next use overwrites are dead at their release unless they
// are kept: three tensors overwritten in turn in a budget of one hold only
// their leases, however short the budget.
TEST(NvmeFloorTest, DeadContentsNeedNothing) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10), c = s.Tensor(10);
  s.Use(a, Access::kOverwrite).Use(b, Access::kOverwrite);
  s.Use(c, Access::kOverwrite);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

// The same three kept to their overwrites: at each position one is leased
// and the other two (20 bytes, dirty) wait, 20 short of a budget of 10.
// Each waits over two positions, so the writes are at least 3 x 20 / 2 =
// 30 (all three written), never read; the sweep's copies leave out the
// one crossing its cut, so it may come out a byte short.
TEST(NvmeFloorTest, EveryAccessAnOverwriteKeptToTheNext) {
  Step s;
  const uint32_t a = s.Tensor(10), b = s.Tensor(10), c = s.Tensor(10);
  const uint32_t kept = PlanAccess::kKeptToOverwrite;
  s.Use(a, Access::kOverwrite, 1, kept).Use(b, Access::kOverwrite, 1, kept);
  s.Use(c, Access::kOverwrite, 1, kept);
  const NvmeFloors f = s.Floors(10);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_LE(f.write_bytes, 30u);
  EXPECT_GE(f.write_bytes, 29u);
}

// Contents kept until a discard at a position: a (10, overwritten at 0)
// waits over positions 1..3 to its next overwrite, while b and c take the
// budget of 10 there; what must be written is a's contents where they are
// still kept. Dying at 2 keeps them over position 1; at 1, the first
// acquire after the lease, not at all; at 0 (in the next step, the
// overwrite's own position) to the overwrite, like kKeptToOverwrite.
TEST(NvmeFloorTest, ContentsKeptUntilADiscardAtAPosition) {
  const auto floors = [](uint32_t dies_at) {
    Step s;
    const uint32_t a = s.Tensor(10), b = s.Tensor(10), c = s.Tensor(10);
    s.Use(a, Access::kOverwrite, 1, dies_at).Use(b, Access::kOverwrite);
    s.Use(b, Access::kRead).Use(c, Access::kOverwrite);
    return s.Floors(10);
  };
  EXPECT_EQ(floors(PlanAccess::kKeptToOverwrite).write_bytes, 10u);
  EXPECT_EQ(floors(3).write_bytes, 10u);
  EXPECT_EQ(floors(2).write_bytes, 10u);
  EXPECT_EQ(floors(1).write_bytes, 0u);
  EXPECT_EQ(floors(0).write_bytes, 10u);
  EXPECT_EQ(floors(PlanAccess::kDiesAtRelease).write_bytes, 0u);
  EXPECT_EQ(floors(PlanAccess::kKeptToOverwrite).read_bytes, 0u);
}

// A home above NVMe holds its bytes all step; a lease of it on its home
// tier is the same copy, one on the faster tier a second. h (6, homed on
// the host, written) is leased at 0 and a (10, read once) waits over
// position 0 beside it. Leased on the device: 6 + 6 + 10 = 22 there, 2
// short of a budget of 20, and a's wait is all NVMe may take: 2 read. h's
// contents never go to NVMe and a is clean: nothing written. A home on the
// device leased there holds 16 at most.
TEST(NvmeFloorTest, ALeaseAboveItsHomeIsASecondCopy) {
  const auto floors = [](Tier home, uint64_t budget) {
    Step s;
    const uint32_t h = s.Tensor(6, home), a = s.Tensor(10);
    s.Use(h, Access::kWrite);
    s.Use(a, Access::kRead);
    return s.Floors(budget / 2, budget - budget / 2);
  };
  EXPECT_EQ(floors(Tier::kHost, 22).read_bytes, 0u);
  EXPECT_EQ(floors(Tier::kHost, 20).read_bytes, 2u);
  EXPECT_EQ(floors(Tier::kHost, 20).write_bytes, 0u);
  EXPECT_EQ(floors(Tier::kDevice, 16).read_bytes, 0u);
  EXPECT_EQ(floors(Tier::kDevice, 16).write_bytes, 0u);
}

// A dirty version read on the NVMe tier is written whatever the budget,
// once however many such reads it has; a version written on NVMe itself
// is already there and a clean one was never changed.
TEST(NvmeFloorTest, ADirtyVersionReadOnNvmeIsAlwaysWrittenOnce) {
  const auto writes = [](Tier write_tier, Access access) {
    Step s;
    const uint32_t a = s.Tensor(10);
    s.Use(a, access, 1, PlanAccess::kDiesAtRelease, write_tier);
    s.Use(a, Access::kRead, 1, PlanAccess::kDiesAtRelease, Tier::kNvme);
    s.Use(a, Access::kRead, 1, PlanAccess::kDiesAtRelease, Tier::kNvme);
    return s.Floors(uint64_t{1} << 40).write_bytes;
  };
  EXPECT_EQ(writes(Tier::kDevice, Access::kWrite), 10u);
  EXPECT_EQ(writes(Tier::kNvme, Access::kWrite), 0u);
  EXPECT_EQ(writes(Tier::kDevice, Access::kRead), 0u);
}

// Budgets near the largest a signed byte count holds: the device and the
// host each hold every byte of the step (each budget alone is 2^63 - 1),
// so nothing need come from NVMe. Their sum passes INT64_MAX; it must not
// wrap into a negative budget that makes every byte a shortfall.
TEST(NvmeFloorTest, HugeBudgetsNeedNothing) {
  const auto floors = [](uint64_t device, uint64_t host) {
    Step s;
    const uint32_t w = s.Tensor(10), a = s.Tensor(5);
    s.Use(w, Access::kRead).Use(a, Access::kOverwrite).Use(a, Access::kRead);
    s.Use(w, Access::kWrite);
    return s.Floors(device, host);
  };
  const uint64_t most = uint64_t{INT64_MAX};
  EXPECT_EQ(floors(most, 0).read_bytes, 0u);
  EXPECT_EQ(floors(most, 0).write_bytes, 0u);
  EXPECT_EQ(floors(most, most).read_bytes, 0u);
  EXPECT_EQ(floors(most, most).write_bytes, 0u);
}

// Leases alone past the budgets (the planner still plans such a step and
// reports the overflow): what no schedule can move to NVMe is no NVMe
// traffic. a (10) is leased at the only access of its step and never
// waits, so there is nothing to read back; nothing is written in the step
// at all, so there is nothing to write. The fullest position is 5 short of
// a budget of 5, but no eviction can cover that.
TEST(NvmeFloorTest, LeasesAlonePastTheBudgetsMoveNothing) {
  Step s;
  const uint32_t a = s.Tensor(10);
  s.Use(a, Access::kRead);
  const NvmeFloors f = s.Floors(5);
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

TEST(NvmeFloorTest, AnEmptyStepHasNoFloor) {
  const NvmeFloors f = NvmeFloorBytes(PlanInput{});
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

}  // namespace
}  // namespace strata
