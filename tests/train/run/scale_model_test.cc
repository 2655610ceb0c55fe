// scale_model_test.cc: the sharded data-parallel model on paper
// (scale_model.h) — its byte counts are ZeRO-3's, memory per rank falls as
// 1/N, state spills device -> host -> NVMe as budgets shrink, the bound
// term is named, bad profiles are refused, and ZeRO-Infinity's published
// model sizes fit its testbed by the model.
#include "train/run/scale_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "strata/options.h"

namespace strata::train {
namespace {

using ::testing::HasSubstr;

const ScaleShape& ShapeNamed(const std::string& name) {
  for (const ScaleShape& s : ScaleShapes()) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no shape " << name;
  return ScaleShapes().front();
}

// A roomy rank: everything fits on the device for the small shape.
RankProfile Roomy() {
  return {.device_bytes = 141e9,
          .host_bytes = 1e12,
          .nvme_bytes = 4e12,
          .h2d_gbps = 50,
          .d2h_gbps = 50,
          .nvme_read_gbps = 6,
          .nvme_write_gbps = 4,
          .net_gbps = 50,
          .net_latency_s = 5e-6,
          .device_tflops = 400,
          .host_adam_gps = 1,
          .tokens_per_rank = 8192};
}

TEST(ScaleModelTest, ShapesHaveTheirNamedSizes) {
  EXPECT_NEAR(GptParameterCount(ShapeNamed("gpt2-xl").config), 1.56e9, 0.01e9);
  EXPECT_NEAR(GptParameterCount(ShapeNamed("gpt3-175b").config), 175e9, 1e9);
  EXPECT_NEAR(GptParameterCount(ShapeNamed("1t").config), 1.0e12, 0.02e12);
  EXPECT_NEAR(GptParameterCount(ShapeNamed("32t").config), 32e12, 0.1e12);
}

TEST(ScaleModelTest, OneRankCommunicatesNothingAndNRanksZero3sBytes) {
  const ScaleShape& xl = ShapeNamed("gpt2-xl");
  const ScaleEstimate one = *EstimateScale(xl, Roomy(), 1);
  EXPECT_TRUE(one.fits) << one.why_not;
  EXPECT_EQ(one.sent_bytes, 0);
  EXPECT_EQ(one.comm_s, 0);
  for (int n : {2, 8, 512}) {
    const ScaleEstimate e = *EstimateScale(xl, Roomy(), n);
    // Two all-gathers and a reduce-scatter of the 16-bit model.
    EXPECT_DOUBLE_EQ(e.sent_bytes, 6 * e.parameters * (n - 1) / n);
    EXPECT_DOUBLE_EQ(e.state_bytes, 16 * e.parameters / n);
  }
}

TEST(ScaleModelTest, StateSpillsDeviceHostNvmeAsBudgetsShrink) {
  const ScaleShape& big = ShapeNamed("gpt3-175b");
  RankProfile p = Roomy();
  p.tokens_per_rank = 2048;                      // 4.8 GB of checkpoints
  ScaleEstimate e = *EstimateScale(big, p, 64);  // 43.75 GB of state a rank
  ASSERT_TRUE(e.fits) << e.why_not;
  EXPECT_EQ(e.optimizer_split.Where(), "device");
  EXPECT_EQ(e.nvme_read_bytes + e.nvme_write_bytes + e.d2h_bytes, 0);
  EXPECT_EQ(e.optimizer_s, 0);
  const double shard = e.parameters / 64;
  // 6.5 GB of working set; the 16-bit copies (11 GB) and the checkpoints
  // stay; the optimizer's 32.8 GB fills the device's last 7.8 GB and
  // spills to the host.
  p.device_bytes = 30e9;
  e = *EstimateScale(big, p, 64);
  ASSERT_TRUE(e.fits) << e.why_not;
  EXPECT_EQ(e.parameters_split.Where(), "device");
  EXPECT_EQ(e.checkpoints_split.Where(), "device");
  EXPECT_EQ(e.optimizer_split.Where(), "device+host");
  const double opt = 12 * shard;
  EXPECT_NEAR(e.optimizer_split.on[0] + e.optimizer_split.on[1], opt, 1);
  const double host_part = e.optimizer_split.on[1] / opt;
  EXPECT_DOUBLE_EQ(e.d2h_bytes, 2 * shard * host_part);  // its gradients
  EXPECT_DOUBLE_EQ(e.h2d_bytes, 2 * shard * host_part);  // its parameters
  EXPECT_DOUBLE_EQ(e.optimizer_s, shard * host_part / 1e9);
  EXPECT_EQ(e.nvme_read_bytes, 0);
  p.host_bytes = 10e9;  // now the host fills too: the rest goes to NVMe
  e = *EstimateScale(big, p, 64);
  ASSERT_TRUE(e.fits) << e.why_not;
  EXPECT_EQ(e.optimizer_split.Where(), "device+host+nvme");
  EXPECT_DOUBLE_EQ(e.optimizer_split.on[1], 10e9);
  EXPECT_DOUBLE_EQ(e.nvme_read_bytes, e.optimizer_split.on[2]);
  EXPECT_DOUBLE_EQ(e.nvme_write_bytes, e.optimizer_split.on[2]);
  EXPECT_DOUBLE_EQ(
      e.nvme_s, e.optimizer_split.on[2] / 6e9 + e.optimizer_split.on[2] / 4e9);
  p.nvme_bytes = 1e9;
  e = *EstimateScale(big, p, 64);
  EXPECT_FALSE(e.fits);
  EXPECT_THAT(e.why_not, HasSubstr("more ranks or more memory"));
}

// Device and host together hold what neither holds alone: no NVMe needed.
TEST(ScaleModelTest, KindsSplitAcrossTiersRatherThanSkipOne) {
  RankProfile p = Roomy();
  p.host_bytes = 256e9;
  p.nvme_bytes = 0;
  const ScaleEstimate e = *EstimateScale(ShapeNamed("gpt3-175b"), p, 8);
  ASSERT_TRUE(e.fits) << e.why_not;  // 349 GB of state in 141 + 256 GB
  EXPECT_EQ(e.state_on[2], 0);
  EXPECT_EQ(e.optimizer_split.Where(), "device+host");
}

TEST(ScaleModelTest, ParametersOnNvmeAreReadForEachGatherAndWrittenOnce) {
  RankProfile p = Roomy();
  p.device_bytes = 20e9;
  p.host_bytes = 1e9;
  p.tokens_per_rank = 1024;
  const ScaleEstimate e = *EstimateScale(ShapeNamed("1t"), p, 64);
  ASSERT_TRUE(e.fits) << e.why_not;
  const double shard = e.parameters / 64;
  EXPECT_EQ(e.parameters_split.Where(), "device+host+nvme");
  const double p_nvme = e.parameters_split.on[2];
  const double g_nvme = e.gradients_split.on[2];
  EXPECT_EQ(e.gradients_split.Where(), "nvme");
  EXPECT_DOUBLE_EQ(e.nvme_read_bytes,
                   2 * p_nvme + g_nvme + e.optimizer_split.on[2]);
  EXPECT_DOUBLE_EQ(e.nvme_write_bytes,
                   p_nvme + g_nvme + e.optimizer_split.on[2]);
  EXPECT_NEAR(g_nvme + e.optimizer_split.on[2], 14 * shard, 1e3);
}

TEST(ScaleModelTest, CheckpointsThatMissTheDeviceCrossTheLinkTwice) {
  RankProfile p = Roomy();
  p.device_bytes = 8e9;  // 3.3 GB beside the working set
  p.tokens_per_rank = 2048;
  const ScaleEstimate e = *EstimateScale(ShapeNamed("gpt3-175b"), p, 64);
  ASSERT_TRUE(e.fits) << e.why_not;
  EXPECT_EQ(e.checkpoints_split.Where(), "device+host");
  EXPECT_EQ(e.optimizer_split.Where(), "host");
  const double shard = e.parameters / 64;
  EXPECT_DOUBLE_EQ(e.d2h_bytes, 2 * shard + e.checkpoints_split.on[1]);
}

TEST(ScaleModelTest, TheStepIsItsLargestTermAndNamesIt) {
  RankProfile p = Roomy();
  p.net_gbps = 0.1;  // a slow network
  const ScaleEstimate e = *EstimateScale(ShapeNamed("gpt2-xl"), p, 8);
  EXPECT_STREQ(e.bound, "interconnect");
  EXPECT_DOUBLE_EQ(e.step_s, e.comm_s);
  EXPECT_DOUBLE_EQ(e.serial_step_s, e.compute_s + e.comm_s + e.link_s +
                                        e.nvme_s + e.optimizer_s);
  EXPECT_GT(e.serial_step_s, e.step_s);
  // More ranks: the same bytes sent (nearly), more latency.
  const ScaleEstimate wide = *EstimateScale(ShapeNamed("gpt2-xl"), p, 512);
  EXPECT_GT(wide.comm_s, e.comm_s);
}

TEST(ScaleModelTest, MicroBatchesRepeatTheGathersNotTheOptimizerTraffic) {
  RankProfile p = Roomy();
  p.host_bytes = 10e9;  // the optimizer on NVMe
  p.device_bytes = 30e9;
  p.tokens_per_rank = 2048;
  const ScaleShape& big = ShapeNamed("gpt3-175b");
  const ScaleEstimate one = *EstimateScale(big, p, 64);
  p.micro_batches = 4;
  const ScaleEstimate four = *EstimateScale(big, p, 64);
  ASSERT_TRUE(one.fits && four.fits);
  EXPECT_DOUBLE_EQ(four.sent_bytes, 4 * one.sent_bytes);
  EXPECT_DOUBLE_EQ(four.compute_s, 4 * one.compute_s);
  EXPECT_DOUBLE_EQ(four.nvme_write_bytes, one.nvme_write_bytes);
  EXPECT_DOUBLE_EQ(four.d2h_bytes, one.d2h_bytes);  // the gradient shard
  EXPECT_DOUBLE_EQ(four.device_working_bytes, one.device_working_bytes);
}

TEST(ScaleModelTest, RanksWithinANodeUseItsFasterLinks) {
  RankProfile p = Roomy();
  p.ranks_per_node = 8;
  p.intra_node_gbps = 450;
  const ScaleShape& xl = ShapeNamed("gpt2-xl");
  const ScaleEstimate inside = *EstimateScale(xl, p, 8);
  const ScaleEstimate across = *EstimateScale(xl, p, 16);
  const double latency = 3 * 48 * p.net_latency_s;
  EXPECT_DOUBLE_EQ(inside.comm_s, inside.sent_bytes / 450e9 + 7 * latency);
  EXPECT_DOUBLE_EQ(across.comm_s, across.sent_bytes / 50e9 + 15 * latency);
}

TEST(ScaleModelTest, EnoughMicroBatchesHideThePerStepTransfers) {
  RankProfile p = Roomy();
  p.host_bytes = 10e9;  // the optimizer's state crosses NVMe each step
  p.device_bytes = 20e9;
  p.tokens_per_rank = 2048;
  p.net_gbps = 1000;  // collectives never the bound
  const ScaleShape& big = ShapeNamed("gpt3-175b");
  const int m = MicroBatchesToComputeBound(big, p, 64);
  ASSERT_GT(m, 1);
  p.micro_batches = m;
  EXPECT_STREQ(EstimateScale(big, p, 64)->bound, "compute");
  p.micro_batches = m / 2;
  EXPECT_STRNE(EstimateScale(big, p, 64)->bound, "compute");
  p.net_gbps = 0.01;  // the gathers of every micro-batch outrun compute
  EXPECT_EQ(MicroBatchesToComputeBound(big, p, 64), 0);
}

TEST(ScaleModelTest, TooManyTokensForTheDeviceIsExplained) {
  RankProfile p = Roomy();
  p.tokens_per_rank = 1 << 22;
  const ScaleEstimate e = *EstimateScale(ShapeNamed("gpt2-xl"), p, 8);
  EXPECT_FALSE(e.fits);
  EXPECT_THAT(e.why_not, HasSubstr("fewer tokens per rank"));
}

TEST(ScaleModelTest, BadInputIsRefused) {
  EXPECT_EQ(EstimateScale(ShapeNamed("1t"), Roomy(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  RankProfile p = Roomy();
  p.net_gbps = 0;
  absl::StatusOr<ScaleEstimate> e = EstimateScale(ShapeNamed("1t"), p, 8);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("interconnect"));
  p = Roomy();
  p.nvme_read_gbps = 0;
  EXPECT_FALSE(EstimateScale(ShapeNamed("1t"), p, 8).ok());
}

// ZeRO-Infinity fits 1T parameters on one DGX-2 node and 32T on 32 nodes,
// both only with NVMe: the model agrees on its testbed's memory.
TEST(ScaleModelTest, ZeroInfinitysModelSizesFitItsTestbed) {
  const RankProfile dgx2 = Dgx2V100Rank();
  for (const auto& [name, ranks] :
       {std::pair<std::string, int>{"1t", 16}, {"32t", 512}}) {
    SCOPED_TRACE(name);
    const ScaleEstimate e = *EstimateScale(ShapeNamed(name), dgx2, ranks);
    EXPECT_TRUE(e.fits) << e.why_not;
    EXPECT_THAT(e.optimizer_split.Where(), HasSubstr("nvme"));
    RankProfile no_nvme = dgx2;
    no_nvme.nvme_bytes = 0;
    EXPECT_FALSE(EstimateScale(ShapeNamed(name), no_nvme, ranks)->fits);
  }
  EXPECT_EQ(ZeroInfinityFigures().size(), 3u);
}

}  // namespace
}  // namespace strata::train
