// Unit tests for NvmeReadFloorBytes (scheduler/nvme_floor.h) on hand-built
// traces: what is live between accesses, across the step boundary, and the
// fullest point less the bytes above NVMe.
#include "scheduler/nvme_floor.h"

#include <gtest/gtest.h>

#include "absl/container/flat_hash_map.h"

namespace strata {
namespace {

AccessEvent Ev(uint64_t id, Access access) {
  return {TensorId{id}, Tier::kDevice, access};
}

// A weight (10 bytes) read in forward and written by the optimizer is live
// all step; an activation (5 bytes) overwritten in forward and read in
// backward is live only between the two (position 2), then dead until the
// next step overwrites it. The fullest point holds 15 bytes.
TEST(NvmeFloorTest, FullestPointLessWhatFitsAboveNvme) {
  const Trace trace({Ev(1, Access::kRead), Ev(2, Access::kOverwrite),
                     Ev(2, Access::kRead), Ev(1, Access::kWrite)});
  const absl::flat_hash_map<uint64_t, uint64_t> bytes = {{1, 10}, {2, 5}};
  const auto bytes_of = [&](TensorId id) { return bytes.at(id.value); };
  EXPECT_EQ(NvmeReadFloorBytes(trace, bytes_of, 12), 3u);
  EXPECT_EQ(NvmeReadFloorBytes(trace, bytes_of, 15), 0u);
  EXPECT_EQ(NvmeReadFloorBytes(trace, bytes_of, 0), 15u);
}

// A tensor used once per step is live across the whole cycle unless that
// use overwrites it; unknown tensors (0 bytes) do not count.
TEST(NvmeFloorTest, OneUseAStepIsLiveAllStepUnlessItOverwrites) {
  const Trace trace(
      {Ev(1, Access::kRead), Ev(2, Access::kOverwrite), Ev(3, Access::kRead)});
  const absl::flat_hash_map<uint64_t, uint64_t> bytes = {
      {1, 7}, {2, 100}, {3, 0}};
  EXPECT_EQ(NvmeReadFloorBytes(
                trace, [&](TensorId id) { return bytes.at(id.value); }, 0),
            7u);
  EXPECT_EQ(NvmeReadFloorBytes(
                Trace(), [](TensorId) { return 1; }, 0),
            0u);
}

}  // namespace
}  // namespace strata
