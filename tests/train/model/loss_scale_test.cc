// loss_scale_test.cc: DynamicLossScale's policy (train/model/loss_scale.h):
// start at 2^16, halve and skip on overflow, double after the growth
// interval of clean steps, never below the floor nor above the ceiling, the
// history of changes, and the options it refuses.
#include "train/model/loss_scale.h"

#include "gtest/gtest.h"

namespace strata::train {
namespace {

TEST(LossScaleTest, StartsAt65536AndDoublesAfter1000CleanSteps) {
  DynamicLossScale s = *DynamicLossScale::Create();
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 65536.0f);
  for (int64_t step = 1; step <= 999; ++step) ASSERT_TRUE(s.Update(step, 0));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_TRUE(s.Update(1000, 0));
  EXPECT_EQ(s.scale(), 131072.0f);
  ASSERT_EQ(s.history().size(), 2u);
  EXPECT_EQ(s.history()[0].step, 0);
  EXPECT_EQ(s.history()[0].scale, 65536.0f);
  EXPECT_EQ(s.history()[1].step, 1001);
  EXPECT_EQ(s.history()[1].scale, 131072.0f);
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaleTest, OverflowHalvesSkipsAndRestartsTheCount) {
  DynamicLossScale s = *DynamicLossScale::Create();
  for (int64_t step = 1; step <= 500; ++step) ASSERT_TRUE(s.Update(step, 0));
  EXPECT_FALSE(s.Update(501, 3));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skipped_steps(), 1);
  // The 500 clean steps before the overflow no longer count.
  for (int64_t step = 502; step <= 1500; ++step) ASSERT_TRUE(s.Update(step, 0));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_TRUE(s.Update(1501, 0));
  EXPECT_EQ(s.scale(), 65536.0f);
  ASSERT_EQ(s.history().size(), 3u);
  EXPECT_EQ(s.history()[1].step, 502);
  EXPECT_EQ(s.history()[1].scale, 32768.0f);
  EXPECT_EQ(s.history()[2].step, 1502);
}

TEST(LossScaleTest, NeverBelowTheFloorNorAboveTheCeiling) {
  DynamicLossScale s = *DynamicLossScale::Create({.initial_scale = 4.0f});
  EXPECT_FALSE(s.Update(1, 1));
  EXPECT_FALSE(s.Update(2, 1));
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_FALSE(s.Update(3, 1));  // still skipped, the scale stays 1
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_EQ(s.skipped_steps(), 3);
  EXPECT_EQ(s.history().size(), 3u);  // 4, 2, 1: no entry for staying at 1
  DynamicLossScale top = *DynamicLossScale::Create(
      {.initial_scale = 8.0f, .growth_interval = 1, .max_scale = 16.0f});
  top.Update(1, 0);
  top.Update(2, 0);
  EXPECT_EQ(top.scale(), 16.0f);
}

TEST(LossScaleTest, RefusesScalesThatAreNotPowersOfTwo) {
  const auto bad = DynamicLossScale::Create({.initial_scale = 1000.0f});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("initial_scale"), std::string::npos);
  EXPECT_FALSE(DynamicLossScale::Create({.min_scale = 0.0f}).ok());
  EXPECT_FALSE(
      DynamicLossScale::Create({.initial_scale = 0.5f, .min_scale = 1.0f})
          .ok());
  const auto interval = DynamicLossScale::Create({.growth_interval = 0});
  EXPECT_NE(interval.status().message().find("growth_interval"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::train
