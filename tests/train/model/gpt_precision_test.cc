// gpt_precision_test.cc: the GPT in bf16 and fp16 on the simulated device —
// offloaded, host-huge and checkpointed runs give the resident run's bits,
// clipped steps roll back exactly, a loss scale that overflows skips steps
// without changing a weight, stochastic rounding repeats, and the 16-bit
// run learns as the fp32 one does while moving half the bytes.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/gpt_test_util.h"
#include "train/compute/precision.h"
#include "train/model/gpt.h"
#include "train/model/gpt_config.h"

namespace strata::train {
namespace {

using ::strata::train::testing::Micro;
using ::strata::train::testing::Train;
using ::strata::train::testing::TrainRun;
using ::strata::train::testing::Where;

GptConfig MicroIn(Precision p) {
  GptConfig c = Micro();
  c.precision = p;
  return c;
}

class GptPrecisionTest : public ::testing::TestWithParam<Precision> {};

TEST_P(GptPrecisionTest, OffloadedAndHostHugeRunsAreTheResidentBits) {
  const GptConfig c = MicroIn(GetParam());
  const TrainRun resident = Train(Where::kResident, c, 5);
  const TrainRun offloaded = Train(Where::kOffloaded, c, 5);
  const TrainRun huge = Train(Where::kHostHuge, c, 5);
  ASSERT_EQ(resident.losses.size(), 5u);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.wte, offloaded.wte);  // the fp32 master weights
  EXPECT_EQ(resident.qkv, offloaded.qkv);
  EXPECT_EQ(huge.losses, offloaded.losses);
  EXPECT_EQ(huge.qkv, offloaded.qkv);
  EXPECT_EQ(offloaded.adam_steps, 5);
  EXPECT_EQ(offloaded.skipped_steps, 0);
  // Every step speculated (a non-finite gradient could still skip it).
  EXPECT_GT(offloaded.clip.backup_bytes, 0u);
}

TEST_P(GptPrecisionTest, ClippedAndCheckpointedStepsKeepTheBits) {
  GptConfig c = MicroIn(GetParam());
  c.grad_clip = 2.0f;  // every step clips: one rollback, then deferred
  const TrainRun resident = Train(Where::kResident, c, 4);
  c.checkpoint = ActivationCheckpointing::kOffload;
  const TrainRun offloaded = Train(Where::kOffloaded, c, 4);
  ASSERT_EQ(offloaded.losses.size(), 4u);
  EXPECT_EQ(offloaded.clip.clipped, 4);
  EXPECT_EQ(offloaded.clip.rolled_back, 1);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.wte, offloaded.wte);
  EXPECT_EQ(resident.qkv, offloaded.qkv);
  EXPECT_GT(offloaded.recompute_seconds, 0);
}

TEST_P(GptPrecisionTest, LearnsAsFp32DoesWithHalfTheLinkBytes) {
  const TrainRun fp32 = Train(Where::kOffloaded, Micro(), 30);
  const TrainRun half = Train(Where::kOffloaded, MicroIn(GetParam()), 30);
  ASSERT_EQ(half.losses.size(), 30u);
  EXPECT_LT(half.losses.back(), 0.5 * half.losses.front());
  EXPECT_NE(half.losses, fp32.losses);
  EXPECT_EQ(half.adam_steps + half.skipped_steps, 30);
  if (GetParam() == Precision::kBf16) {
    // Not the fp32 bits, but the same curve to a few percent. (fp16 at
    // 2^16 skips steps 17-20 here as its gradients grow, halving to 2^12,
    // so it trails by those steps.)
    EXPECT_NEAR(half.losses.back(), fp32.losses.back(),
                0.05 * fp32.losses.back());
  }
  // 16-bit parameters up, 16-bit gradients down.
  const double h2d = double(half.train_link_bytes[int(Link::kH2D)]) /
                     double(fp32.train_link_bytes[int(Link::kH2D)]);
  const double d2h = double(half.train_link_bytes[int(Link::kD2H)]) /
                     double(fp32.train_link_bytes[int(Link::kD2H)]);
  EXPECT_LT(h2d, 0.75) << "h2d ratio " << h2d;
  EXPECT_LT(d2h, 0.75) << "d2h ratio " << d2h;
  EXPECT_LT(half.state_bytes, fp32.state_bytes * 2);  // masters beside
}

TEST_P(GptPrecisionTest, StochasticRoundingRepeatsAndDiffersFromNearest) {
  GptConfig c = MicroIn(GetParam());
  const TrainRun nearest = Train(Where::kOffloaded, c, 4);
  c.rounding = Rounding::kStochastic;
  const TrainRun a = Train(Where::kOffloaded, c, 4);
  const TrainRun b = Train(Where::kResident, c, 4);
  ASSERT_EQ(a.losses.size(), 4u);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.qkv, b.qkv);
  EXPECT_NE(a.losses, nearest.losses);
}

INSTANTIATE_TEST_SUITE_P(Types, GptPrecisionTest,
                         ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const auto& info) {
                           return std::string(PrecisionName(info.param));
                         });

TEST(GptFp16Test, AnOverflowingScaleSkipsStepsAndHalves) {
  GptConfig c = MicroIn(Precision::kFp16);
  // At 2^24 the scaled gradients overflow fp16 (65504): the first 8 steps
  // are skipped, each halving the scale, until 2^16 fits.
  c.loss_scale.initial_scale = 16777216.0f;
  const TrainRun run = Train(Where::kOffloaded, c, 12);
  ASSERT_EQ(run.losses.size(), 12u);
  EXPECT_EQ(run.skipped_steps, 8);
  EXPECT_EQ(run.adam_steps, 4);
  EXPECT_EQ(run.loss_scale_history.back().scale, 65536.0f);
  ASSERT_EQ(run.loss_scale_history.size(), 1u + run.skipped_steps);
  EXPECT_EQ(run.loss_scale_history.front().scale, 16777216.0f);
  for (size_t i = 1; i < run.loss_scale_history.size(); ++i) {
    EXPECT_EQ(run.loss_scale_history[i].scale,
              run.loss_scale_history[i - 1].scale / 2);
    EXPECT_GT(run.loss_scale_history[i].step,
              run.loss_scale_history[i - 1].step);
  }
  // The skips (restored speculative updates) move nothing a resident run
  // does not.
  const TrainRun resident = Train(Where::kResident, c, 12);
  EXPECT_EQ(resident.losses, run.losses);
  EXPECT_EQ(resident.qkv, run.qkv);
  for (double l : run.losses) EXPECT_TRUE(std::isfinite(l));
}

TEST(GptFp16Test, SkippedStepLeavesEveryWeightAsItWas) {
  testing::TempDir dir;
  GptConfig c = MicroIn(Precision::kFp16);
  c.loss_scale.initial_scale = 16777216.0f;  // the first step overflows
  StoreOptions so = testing::OptionsFor(Where::kOffloaded, dir.path(), c);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup = OpenGptSetup(so, c);
  ASSERT_TRUE(setup.ok()) << setup.status();
  Gpt& gpt = *(*setup)->model;
  const std::vector<std::string> names = {"wte", "wpe", "block0.qkv.weight",
                                          "block1.fc.bias", "lnf.weight"};
  std::vector<std::vector<float>> before(names.size()), after(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(gpt.ReadParameter(names[i], &before[i]).ok());
  }
  testing::Batches batches(c);
  std::vector<int32_t> in, out;
  batches.Next(&in, &out);
  ASSERT_TRUE(gpt.TrainStep(in.data(), out.data(), c.batch).ok());
  ASSERT_EQ(gpt.skipped_steps(), 1);
  EXPECT_EQ(gpt.steps(), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(gpt.ReadParameter(names[i], &after[i]).ok());
    EXPECT_EQ(before[i], after[i]) << names[i];
  }
  EXPECT_EQ(gpt.loss_scale()->scale(), 8388608.0f);
}

}  // namespace
}  // namespace strata::train
