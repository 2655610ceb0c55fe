// `strata bench -t scheduler` at a tiny size: every variant runs and reports
// consistent numbers (speed itself is the bench's business, not a test's).
#include "apps/bench/scheduler_bench.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(SchedulerBenchTest, TinyRunReportsConsistentNumbers) {
  SchedulerBenchConfig c;
  c.layers = 6;
  c.layer_bytes = 256 * 1024;
  c.device_budget_bytes = c.layers * c.layer_bytes / 4;
  c.link_gbps = 1.0;
  c.compute_seconds_per_layer = 0.0003;
  c.steps = 4;
  absl::StatusOr<SchedulerBenchResult> r = RunSchedulerBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->compute_seconds, 2 * 6 * 0.0003);
  EXPECT_EQ(r->model_bytes, 6u * 256 * 1024);
  EXPECT_GT(r->transfer_seconds, 0);  // 4x the device: layers must move
  for (double s :
       {r->step_seconds, r->step_seconds_on_demand, r->step_seconds_lru}) {
    EXPECT_GE(s, r->compute_seconds);  // the busy time is a floor
  }
  for (double h : {r->hit_rate, r->hit_rate_dynamic}) {
    EXPECT_GE(h, 0.0);
    EXPECT_LE(h, 1.0);
  }
  EXPECT_EQ(r->rerecords_dynamic, 0u) << "one skipped layer must not re-record";
}

}  // namespace
}  // namespace strata
