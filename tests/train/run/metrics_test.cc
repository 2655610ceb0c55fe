// The report figures of train/run/metrics.h that strata train and
// train_bench both print: the prefetch hit rate, the stall by cause and the
// plan's object.
#include "train/run/metrics.h"

#include <gtest/gtest.h>

namespace strata::train {
namespace {

TEST(MetricsTest, StallByCauseSplitsTheStallIntoRoomAndLoad) {
  Stats s;
  s.stall_seconds = 2.5;
  s.room_seconds = 0.75;
  const nlohmann::json j = StallJson(s);
  EXPECT_DOUBLE_EQ(j["room"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(j["load"].get<double>(), 1.75);
  // Room made off the acquire path (a store call that is not an acquire)
  // can exceed the acquires' stall: the parts never go negative.
  s.room_seconds = 3;
  EXPECT_DOUBLE_EQ(StallJson(s)["room"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(StallJson(s)["load"].get<double>(), 0);
}

TEST(MetricsTest, HitRateCountsOnlyAcquiresThatNeededBytes) {
  Stats s;
  EXPECT_DOUBLE_EQ(PrefetchHitRate(s), 1.0);  // nothing ever moved
  s.prefetch.hit = 3;
  s.stalled_acquires = 1;
  EXPECT_DOUBLE_EQ(PrefetchHitRate(s), 0.75);
}

TEST(MetricsTest, PlanJsonIsNullWithoutAPlan) {
  SchedulerStats s;
  EXPECT_TRUE(PlanJson(s).is_null());
  s.plans = 2;
  s.planned_link_bytes[static_cast<int>(Link::kNvmeRead)] = 1000;
  s.plan_predicted_seconds = 0.25;
  const nlohmann::json j = PlanJson(s);
  EXPECT_EQ(j["plans"].get<uint64_t>(), 2u);
  EXPECT_EQ(j["nvme_read_bytes_per_step"].get<uint64_t>(), 1000u);
  EXPECT_DOUBLE_EQ(j["predicted_step_seconds"].get<double>(), 0.25);
}

}  // namespace
}  // namespace strata::train
