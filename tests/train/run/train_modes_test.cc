// train_modes_test.cc: gradient accumulation and activation checkpointing in
// the MLP — checkpointing never changes a bit and holds fewer activation
// bytes; accumulated micro-batches match one large batch and keep the
// offloaded == resident guarantee.
#include <algorithm>
#include <cmath>
#include <memory>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tests/util/train_test_util.h"
#include "train/compute/compute.h"
#include "train/model/footprint.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

using ::strata::testing::Budgets;
using ::strata::testing::LinkBytes;
using ::strata::testing::Offloaded;
using ::strata::testing::Resident;
using ::strata::testing::RunResult;
using ::strata::testing::SmallJob;
using ::strata::testing::SyntheticData;
using ::strata::testing::TrainWith;

TrainOptions Checkpointed(ActivationCheckpointing mode) {
  TrainOptions job = SmallJob();
  job.model.checkpoint = mode;
  return job;
}

// `micro` micro-batches of 16 / micro samples: the same 16 samples a step.
TrainOptions Accumulated(int micro) {
  TrainOptions job = SmallJob();
  job.model.batch = 16 / micro;
  job.model.accumulate = micro;
  return job;
}

class TrainModesTest : public ::testing::Test {
 protected:
  const Dataset train_ = SyntheticData(512, 1);
  const Dataset test_ = SyntheticData(128, 2);
};

TEST_F(TrainModesTest, BlockCheckpointingIsBitwiseAndHoldsLess) {
  const RunResult none = TrainWith(Resident(), SmallJob(), train_, test_);
  const RunResult block =
      TrainWith(Offloaded(), Checkpointed(ActivationCheckpointing::kBlock),
                train_, test_);
  ASSERT_FALSE(none.result.losses.empty());
  EXPECT_EQ(none.result.losses, block.result.losses);
  EXPECT_EQ(none.weights, block.weights);
  EXPECT_EQ(none.result.test_accuracy, block.result.test_accuracy);
  // 3 hidden layers of 16 x 64 floats: their pre-activations are not kept,
  // only one is live at a time (recomputed in backward).
  EXPECT_LT(block.peak_activation_bytes, none.peak_activation_bytes);
  EXPECT_GE(none.peak_activation_bytes - block.peak_activation_bytes,
            2u * 16 * 64 * 4);
  EXPECT_GT(block.recompute_seconds, 0);
  EXPECT_EQ(none.recompute_seconds, 0);
}

TEST_F(TrainModesTest, OffloadCheckpointingIsBitwiseAndSendsInputsToHost) {
  Budgets roomy = Offloaded();
  roomy.device = 4 * kMiB;  // nothing would leave the device on its own
  roomy.host = 4 * kMiB;
  const RunResult block = TrainWith(
      roomy, Checkpointed(ActivationCheckpointing::kBlock), train_, test_);
  const RunResult offload = TrainWith(
      roomy, Checkpointed(ActivationCheckpointing::kOffload), train_, test_);
  ASSERT_FALSE(block.result.losses.empty());
  EXPECT_EQ(block.result.losses, offload.result.losses);
  EXPECT_EQ(block.weights, offload.weights);
  // The kept inputs went to the host after forward and came back for
  // backward, every step: the 3 hidden activations of 16 x 64 floats cross
  // device -> host (the input batch has a clean host copy from its upload).
  const uint64_t steps = offload.result.losses.size();
  const uint64_t kept = 3 * 16 * 64 * 4;
  const uint64_t d2h = offload.train_link_bytes[int(Link::kD2H)] -
                       block.train_link_bytes[int(Link::kD2H)];
  EXPECT_GE(d2h, steps * kept);
  EXPECT_GT(offload.train_link_bytes[int(Link::kH2D)],
            block.train_link_bytes[int(Link::kH2D)]);
}

TEST_F(TrainModesTest, AccumulatedMicroBatchesMatchOneBatch) {
  const RunResult one = TrainWith(Resident(), SmallJob(), train_, test_);
  const RunResult four = TrainWith(Resident(), Accumulated(4), train_, test_);
  ASSERT_EQ(one.result.losses.size(), four.result.losses.size());
  ASSERT_EQ(four.result.losses.size(), 2u * 512 / 16);
  double worst = 0;
  for (size_t i = 0; i < one.result.losses.size(); ++i) {
    worst =
        std::max(worst, std::abs(one.result.losses[i] - four.result.losses[i]) /
                            one.result.losses[i]);
  }
  // The sums run in another order (four GEMMs with beta 1, not one).
  EXPECT_LT(worst, 1e-3) << "largest relative loss difference " << worst;
  // The first step starts from the same weights: its loss differs only by
  // the forward GEMMs' blocking at 4 rows instead of 16 (float rounding).
  EXPECT_NEAR(one.result.losses[0], four.result.losses[0],
              1e-6 * one.result.losses[0]);
}

TEST_F(TrainModesTest, WholeChunkMicroBatchesAreOneBatchsBits) {
  // Micro-batches of kReductionRows rows add the very chunks one batch's
  // gradient sums add (compute.h): 4 x 64 trains to the bits of 256.
  TrainOptions whole = SmallJob();
  whole.model.batch = 4 * kReductionRows;
  TrainOptions micro = whole;
  micro.model.batch = kReductionRows;
  micro.model.accumulate = 4;
  const Dataset train = SyntheticData(1024, 3);
  Budgets offloaded = Offloaded();
  offloaded.device = 256 * 1024;  // a 64-row layer's working set, and room
  offloaded.host = 1 * kMiB;
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    whole.model.precision = micro.model.precision = p;
    const RunResult one = TrainWith(Resident(), whole, train, test_);
    const RunResult four = TrainWith(offloaded, micro, train, test_);
    ASSERT_EQ(one.result.losses.size(), 8u);
    ASSERT_EQ(four.result.losses.size(), 8u);
    EXPECT_EQ(one.weights, four.weights) << PrecisionName(p);
    // The losses sum per micro-batch first, in double: equal to ~1e-16.
    for (size_t i = 0; i < one.result.losses.size(); ++i) {
      EXPECT_NEAR(four.result.losses[i], one.result.losses[i],
                  1e-12 * one.result.losses[i]);
    }
    EXPECT_EQ(one.result.test_accuracy, four.result.test_accuracy);
  }
}

TEST_F(TrainModesTest, AccumulatedOffloadedBitwiseEqualsResident) {
  TrainOptions job = Accumulated(4);
  job.model.checkpoint = ActivationCheckpointing::kBlock;
  const RunResult resident = TrainWith(Resident(), job, train_, test_);
  const RunResult offloaded = TrainWith(Offloaded(), job, train_, test_);
  ASSERT_FALSE(resident.result.losses.empty());
  EXPECT_EQ(resident.result.losses, offloaded.result.losses);
  EXPECT_EQ(resident.weights, offloaded.weights);
  EXPECT_GT(LinkBytes(offloaded.stats, Link::kNvmeRead), 0u);
}

TEST(TrainModesConfigTest, NonsenseCombinationsAreRejected) {
  ModelConfig c;
  c.accumulate = 0;
  absl::Status s = ComputeFootprint(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--accumulate=0"), std::string::npos) << s;
  c = ModelConfig();
  c.checkpoint = ActivationCheckpointing::kOffload;
  c.home = Tier::kDevice;
  s = ComputeFootprint(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--checkpoint=block"), std::string::npos) << s;
  EXPECT_EQ(ParseActivationCheckpointing("sometimes").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseActivationCheckpointing("offload"),
            ActivationCheckpointing::kOffload);
}

TEST(TrainModesConfigTest, FootprintCountsMicroBatchesAndCheckpointing) {
  ModelConfig c;
  absl::StatusOr<ModelFootprint> one = ComputeFootprint(c);
  c.accumulate = 4;
  absl::StatusOr<ModelFootprint> four = ComputeFootprint(c);
  c.checkpoint = ActivationCheckpointing::kBlock;
  absl::StatusOr<ModelFootprint> block = ComputeFootprint(c);
  ASSERT_TRUE(one.ok() && four.ok() && block.ok());
  EXPECT_EQ(four->activation_bytes, 4 * one->activation_bytes);
  EXPECT_EQ(four->state_bytes(), one->state_bytes());
  // 5 hidden layers of 256 x 1024: 4 pre-activations each become 1 buffer.
  EXPECT_EQ(four->activation_bytes - block->activation_bytes,
            5u * 3 * 256 * 1024 * 4);
  EXPECT_EQ(four->device_working_set_bytes, one->device_working_set_bytes);
}

}  // namespace
}  // namespace strata::train
