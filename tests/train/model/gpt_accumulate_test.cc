// gpt_accumulate_test.cc: the GPT's gradient accumulation (--accumulate) on
// the simulated device — micro-batches run layer-major give one large
// batch's losses to rounding, offloaded and checkpointed runs the resident
// bits, a short last micro-batch works, and the weights cross to the
// device once per pass however many micro-batches there are.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/gpt_test_util.h"
#include "train/model/gpt.h"
#include "train/model/gpt_config.h"

namespace strata::train {
namespace {

using ::strata::train::testing::Micro;
using ::strata::train::testing::Train;
using ::strata::train::testing::TrainRun;
using ::strata::train::testing::Where;

// Micro with `accumulate` micro-batches of batch / accumulate sequences.
GptConfig Split(int accumulate, int64_t batch = 4) {
  GptConfig c = Micro();
  c.batch = batch / accumulate;
  c.accumulate = accumulate;
  return c;
}

TEST(GptAccumulateTest, MicroBatchesGiveOneBatchsLossesToRounding) {
  const TrainRun whole = Train(Where::kOffloaded, Split(1), 8);
  const TrainRun micro = Train(Where::kOffloaded, Split(4), 8);
  ASSERT_EQ(whole.losses.size(), 8u);
  ASSERT_EQ(micro.losses.size(), 8u);
  // The same samples a step, gradients summed in another order.
  double worst = 0;
  for (size_t i = 0; i < whole.losses.size(); ++i) {
    worst = std::max(
        worst, std::abs(micro.losses[i] - whole.losses[i]) / whole.losses[i]);
  }
  EXPECT_LT(worst, 1e-3) << "largest relative difference " << worst;
  EXPECT_GT(whole.losses.front() - whole.losses.back(), 0.5);
  EXPECT_EQ(micro.adam_steps, 8);
}

TEST(GptAccumulateTest, OffloadedAndCheckpointedRunsAreTheResidentBits) {
  GptConfig c = Split(2);
  c.grad_clip = 2.0f;  // clips: rollback and deferred steps with micro-batches
  const TrainRun resident = Train(Where::kResident, c, 4);
  const TrainRun offloaded = Train(Where::kOffloaded, c, 4);
  c.checkpoint = ActivationCheckpointing::kOffload;
  const TrainRun checkpointed = Train(Where::kOffloaded, c, 4);
  ASSERT_EQ(resident.losses.size(), 4u);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.qkv, offloaded.qkv);
  EXPECT_EQ(resident.wte, offloaded.wte);
  EXPECT_EQ(resident.losses, checkpointed.losses);
  EXPECT_EQ(resident.qkv, checkpointed.qkv);
  EXPECT_GT(offloaded.clip.clipped, 0);
  EXPECT_GT(checkpointed.recompute_seconds, 0);
}

TEST(GptAccumulateTest, Bf16AccumulatesInFp32AndKeepsTheBits) {
  GptConfig c = Split(2);
  c.precision = Precision::kBf16;
  const TrainRun resident = Train(Where::kResident, c, 4);
  const TrainRun offloaded = Train(Where::kOffloaded, c, 4);
  ASSERT_EQ(resident.losses.size(), 4u);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.qkv, offloaded.qkv);
}

TEST(GptAccumulateTest, WeightsCrossOncePerPass) {
  // Four micro-batches of one sequence hold the activation bytes of one
  // batch of four; the weights must cross once per pass, not four times.
  const TrainRun one = Train(Where::kHostHuge, Split(1), 3);
  const TrainRun four = Train(Where::kHostHuge, Split(4), 3);
  const double ratio = double(four.train_link_bytes[int(Link::kH2D)]) /
                       double(one.train_link_bytes[int(Link::kH2D)]);
  EXPECT_LT(ratio, 1.5) << "h2d accumulate=4 / 1: " << ratio;
}

TEST(GptAccumulateTest, AShortLastMicroBatchAndBadCountsAreHandled) {
  testing::TempDir dir;
  GptConfig c = Split(2);  // 2 micro-batches of 2 sequences
  StoreOptions so = testing::OptionsFor(Where::kOffloaded, dir.path(), c);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup = OpenGptSetup(so, c);
  ASSERT_TRUE(setup.ok()) << setup.status();
  Gpt& gpt = *(*setup)->model;
  testing::Batches batches(c);
  std::vector<int32_t> in, out;
  batches.Next(&in, &out);
  // 3 sequences: micro-batches of 2 and 1.
  absl::StatusOr<double> loss = gpt.TrainStep(in.data(), out.data(), 3);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(std::isfinite(*loss));
  EXPECT_NEAR(*loss / (3 * c.context), std::log(256.0), 0.3);
  absl::StatusOr<double> eval = gpt.Evaluate(in.data(), out.data(), 4);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(gpt.TrainStep(in.data(), out.data(), 5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpt.steps(), 1);
  GptConfig zero = Micro();
  zero.accumulate = 0;
  zero.classifier_rows = 1;
  const absl::Status s = ComputeGptFootprint(zero).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--accumulate=0"), std::string::npos) << s;
}

}  // namespace
}  // namespace strata::train
