// train_precision_test.cc: mixed precision in the MLP (--precision=bf16 |
// fp16) — where the tensors live never changes a bit, the 16-bit run learns
// as the fp32 one does while moving half the bytes over the device link,
// fp16's loss scale skips the steps that overflow, and stochastic rounding
// repeats bit for bit.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/train_test_util.h"
#include "train/model/footprint.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

using ::strata::testing::Budgets;
using ::strata::testing::Offloaded;
using ::strata::testing::Resident;
using ::strata::testing::RunResult;
using ::strata::testing::SmallJob;
using ::strata::testing::SyntheticData;
using ::strata::testing::TrainWith;

TrainOptions Job(Precision precision,
                 Rounding rounding = Rounding::kNearestEven) {
  TrainOptions job = SmallJob();
  job.model.precision = precision;
  job.model.rounding = rounding;
  return job;
}

// The mean loss of steps [from, from + n).
double MeanLoss(const RunResult& r, size_t from, size_t n) {
  double sum = 0;
  for (size_t i = from; i < from + n; ++i) sum += r.result.losses.at(i);
  return sum / static_cast<double>(n);
}

// Host <-> device bytes of the training steps.
uint64_t DeviceLinkBytes(const RunResult& r) {
  return r.train_link_bytes[int(Link::kH2D)] +
         r.train_link_bytes[int(Link::kD2H)];
}

class TrainPrecisionTest : public ::testing::TestWithParam<Precision> {
 protected:
  const Dataset train_ = SyntheticData(512, 1);
  const Dataset test_ = SyntheticData(128, 2);
};

// Resident, offloaded through NVMe with a host smaller than one layer's
// update, and offloaded with a host that holds everything: the same losses,
// master weights and skipped steps, bit for bit.
TEST_P(TrainPrecisionTest, EveryPlacementGivesTheSameBits) {
  const TrainOptions job = Job(GetParam());
  Budgets huge_host = Offloaded();
  huge_host.host = 8 * kMiB;
  const RunResult resident = TrainWith(Resident(), job, train_, test_);
  const RunResult tiny = TrainWith(Offloaded(), job, train_, test_);
  const RunResult huge = TrainWith(huge_host, job, train_, test_);
  ASSERT_EQ(resident.result.losses.size(), 2u * 512 / 16);
  EXPECT_EQ(resident.result.losses, tiny.result.losses);
  EXPECT_EQ(resident.result.losses, huge.result.losses);
  EXPECT_EQ(resident.weights, tiny.weights);
  EXPECT_EQ(resident.weights, huge.weights);
  EXPECT_EQ(resident.skipped_steps, tiny.skipped_steps);
  EXPECT_GT(tiny.train_link_bytes[int(Link::kNvmeRead)], 0u);
}

// The 16-bit run learns the task about as well as fp32 (the 16-bit roundings
// change the losses, not the outcome), and its parameters and gradients
// cross the device link in 2 bytes instead of 4. Both run on demand: each
// then moves what its accesses need, so the ratio is the format's. (A
// scheduler's choices differ between the two: the planner, say, sends more
// of the 16-bit run's copies over the link to save NVMe bytes.)
TEST_P(TrainPrecisionTest, LearnsLikeFp32AndMovesHalfTheBytes) {
  Budgets on_demand = Offloaded();
  on_demand.prefetch = false;
  const RunResult fp32 =
      TrainWith(on_demand, Job(Precision::kFp32), train_, test_);
  const RunResult half = TrainWith(on_demand, Job(GetParam()), train_, test_);
  ASSERT_FALSE(half.result.losses.empty());
  ASSERT_EQ(half.result.losses.size(), fp32.result.losses.size());
  EXPECT_NE(fp32.result.losses, half.result.losses);
  const double fp32_end = MeanLoss(fp32, 56, 8),
               half_end = MeanLoss(half, 56, 8);
  EXPECT_LT(half_end, 0.9 * MeanLoss(half, 0, 8));  // it learns (fp32: -15%)
  EXPECT_NEAR(half_end, fp32_end, 0.02 * fp32_end);
  EXPECT_NEAR(half.result.test_accuracy, fp32.result.test_accuracy, 0.05);
  const double ratio = static_cast<double>(DeviceLinkBytes(half)) /
                       static_cast<double>(DeviceLinkBytes(fp32));
  EXPECT_LE(ratio, 0.55) << "16-bit / fp32 host<->device bytes";
}

INSTANTIATE_TEST_SUITE_P(Mixed, TrainPrecisionTest,
                         ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const auto& info) {
                           return std::string(PrecisionName(info.param));
                         });

// A loss scale far too large overflows fp16's gradients: each such step is
// skipped (no update: Adam counts only the applied ones) and halves the
// scale until the gradients fit, then training proceeds.
TEST(TrainLossScaleTest, OverflowingStepsAreSkippedAndHalveTheScale) {
  TrainOptions job = Job(Precision::kFp16);
  job.model.loss_scale.initial_scale = 16777216.0f;  // 2^24
  const Dataset train = SyntheticData(512, 1), test = SyntheticData(128, 2);
  const RunResult r = TrainWith(Offloaded(), job, train, test);
  ASSERT_EQ(r.result.losses.size(), 64u);
  EXPECT_GT(r.skipped_steps, 0);
  EXPECT_EQ(r.adam_steps + r.skipped_steps, 64);
  ASSERT_GE(r.loss_scale_history.size(), 2u);
  EXPECT_EQ(r.loss_scale_history[0].scale, 16777216.0f);
  EXPECT_EQ(r.loss_scale_history[0].step, 0);
  for (size_t i = 1; i < r.loss_scale_history.size(); ++i) {
    // Halvings only: 64 steps are far from 1000 clean ones.
    EXPECT_EQ(r.loss_scale_history[i].scale,
              r.loss_scale_history[i - 1].scale / 2);
  }
  EXPECT_EQ(r.skipped_steps,
            static_cast<int64_t>(r.loss_scale_history.size()) - 1);
  EXPECT_LT(MeanLoss(r, 56, 8), 0.9 * MeanLoss(r, 0, 8));
}

// Stochastic rounding draws its bits from (seed, tensor, step, index): two
// placements agree bit for bit, and the result differs from nearest.
TEST(TrainRoundingTest, StochasticRoundingRepeatsBitForBit) {
  const Dataset train = SyntheticData(512, 1), test = SyntheticData(128, 2);
  const TrainOptions job = Job(Precision::kBf16, Rounding::kStochastic);
  const RunResult resident = TrainWith(Resident(), job, train, test);
  const RunResult offloaded = TrainWith(Offloaded(), job, train, test);
  const RunResult nearest =
      TrainWith(Resident(), Job(Precision::kBf16), train, test);
  ASSERT_FALSE(resident.result.losses.empty());
  EXPECT_EQ(resident.result.losses, offloaded.result.losses);
  EXPECT_EQ(resident.weights, offloaded.weights);
  EXPECT_NE(resident.result.losses, nearest.result.losses);
}

TEST(TrainPrecisionConfigTest, NonsenseCombinationsAreRejected) {
  ModelConfig c = SmallJob().model;
  c.rounding = Rounding::kStochastic;  // with fp32
  absl::Status s = ComputeFootprint(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--rounding=stochastic"), std::string::npos) << s;
  c.precision = Precision::kBf16;
  EXPECT_TRUE(ComputeFootprint(c).ok());
}

// 16-bit parameters and gradients: 2 bytes each, beside fp32 gradient sums
// and master weights.
TEST(TrainPrecisionConfigTest, FootprintCountsTheMixedTensors) {
  ModelConfig c = SmallJob().model;
  absl::StatusOr<ModelFootprint> fp32 = ComputeFootprint(c);
  c.precision = Precision::kBf16;
  absl::StatusOr<ModelFootprint> bf16 = ComputeFootprint(c);
  ASSERT_TRUE(fp32.ok() && bf16.ok());
  EXPECT_EQ(2 * bf16->parameter_bytes, fp32->parameter_bytes);
  EXPECT_EQ(2 * bf16->gradient_bytes, 3 * fp32->gradient_bytes);
  EXPECT_EQ(2 * bf16->optimizer_bytes, 3 * fp32->optimizer_bytes);
}

}  // namespace
}  // namespace strata::train
