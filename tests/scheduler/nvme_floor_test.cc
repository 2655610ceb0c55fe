// Unit tests for NvmeFloorBytes (scheduler/nvme_floor.h) on hand-built
// steps whose floors can be worked out by hand: the fullest point, a
// shortfall at every position (where the floor counts each position's
// eviction, not only the fullest one's), writes per dirty version, clean
// contents that evict for free, leases counted once, and homes.
#include "scheduler/nvme_floor.h"

#include <gtest/gtest.h>

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

TEST(NvmeFloorTest, AnEmptyStepHasNoFloor) {
  const NvmeFloors f = NvmeFloorBytes(PlanInput{});
  EXPECT_EQ(f.read_bytes, 0u);
  EXPECT_EQ(f.write_bytes, 0u);
}

}  // namespace
}  // namespace strata
