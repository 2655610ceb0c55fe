// sharded_gpt_test.cc: the GPT sharded over ranks as threads of the test
// (gpt_sharding.cc): N ranks with `accumulate` micro-batches each train bit
// for bit as one unsharded rank with N x accumulate — losses, weights, the
// clipping path (roll-back and deferred steps), mixed precision, activation
// checkpointing — and a rank holds a shard of the state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "tests/util/gpt_test_util.h"
#include "train/comm/collectives.h"

namespace strata::train {
namespace {

using ::testing::HasSubstr;
using testing::Micro;
using testing::Train;
using testing::TrainRun;
using testing::Where;

constexpr int kSteps = 4;

// `ranks` threads train `c` sharded; rank 0's run (every rank's losses and
// gathered parameters are checked equal to it).
// With `nccl_order`, under NCCL's ordering rules
// (MakeStreamOrderedCollectives).
TrainRun TrainSharded(int ranks, const GptConfig& c, Where where,
                      int steps = kSteps, bool nccl_order = false) {
  auto collectives = nccl_order ? MakeStreamOrderedCollectives(ranks, 5.0)
                                : MakeThreadCollectives(ranks, 60.0);
  std::vector<TrainRun> runs(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back(
        [&, r] { runs[r] = Train(where, c, steps, collectives[r].get()); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(runs[r].losses, runs[0].losses) << r;
    EXPECT_EQ(runs[r].wte, runs[0].wte) << r;
    EXPECT_EQ(runs[r].qkv, runs[0].qkv) << r;
  }
  return runs[0];
}

GptConfig WithAccumulate(GptConfig c, int accumulate) {
  c.accumulate = accumulate;
  return c;
}

void ExpectSameBits(const TrainRun& sharded, const TrainRun& one) {
  ASSERT_EQ(one.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(sharded.losses, one.losses);
  EXPECT_EQ(sharded.wte, one.wte);
  EXPECT_EQ(sharded.qkv, one.qkv);
  EXPECT_EQ(sharded.adam_steps, one.adam_steps);
  EXPECT_EQ(sharded.skipped_steps, one.skipped_steps);
}

TEST(ShardedGptTest, TwoRanksAreBitwiseOneRankWithTwiceTheMicroBatches) {
  const GptConfig c = Micro();
  const TrainRun one = Train(Where::kOffloaded, WithAccumulate(c, 2), kSteps);
  const TrainRun two = TrainSharded(2, c, Where::kOffloaded);
  ExpectSameBits(two, one);
  // A rank holds about half the state.
  EXPECT_LT(two.state_bytes, one.state_bytes / 2 + 4096);
  EXPECT_GT(two.state_bytes, one.state_bytes / 2 - 4096);
}

TEST(ShardedGptTest, ThreeRanksAccumulatingTwoMatchSixMicroBatches) {
  const GptConfig c = WithAccumulate(Micro(), 2);
  const TrainRun one = Train(Where::kResident, WithAccumulate(c, 6), kSteps);
  ExpectSameBits(TrainSharded(3, c, Where::kResident), one);
}

TEST(ShardedGptTest, ClippedStepsRollBackAndDeferAlikeOnEveryRank) {
  GptConfig c = Micro();
  c.grad_clip = 0.05f;  // every step clips: a roll-back, then deferred steps
  const TrainRun one = Train(Where::kOffloaded, WithAccumulate(c, 2), kSteps);
  ASSERT_GT(one.clip.clipped, 1);
  ASSERT_GT(one.clip.deferred, 0);
  const TrainRun two = TrainSharded(2, c, Where::kOffloaded);
  ExpectSameBits(two, one);
  EXPECT_EQ(two.clip.clipped, one.clip.clipped);
  EXPECT_EQ(two.clip.deferred, one.clip.deferred);
  EXPECT_EQ(two.clip.last_norm, one.clip.last_norm);
}

TEST(ShardedGptTest, MixedPrecisionShardsToTheSameBits) {
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    GptConfig c = Micro();
    c.precision = p;
    c.rounding =
        p == Precision::kBf16 ? Rounding::kStochastic : Rounding::kNearestEven;
    if (p == Precision::kFp16) {
      // High enough that early steps overflow somewhere and are skipped.
      c.loss_scale.initial_scale = 0x1p24f;
    }
    const TrainRun one = Train(Where::kOffloaded, WithAccumulate(c, 2), kSteps);
    ExpectSameBits(TrainSharded(2, c, Where::kOffloaded), one);
    if (p == Precision::kFp16) {
      EXPECT_GT(one.skipped_steps, 0);
    }
  }
}

TEST(ShardedGptTest, ActivationCheckpointingShardsToTheSameBits) {
  GptConfig c = Micro();
  c.checkpoint = ActivationCheckpointing::kBlock;
  const TrainRun one = Train(Where::kOffloaded, WithAccumulate(c, 2), kSteps);
  ExpectSameBits(TrainSharded(2, c, Where::kOffloaded), one);
}

// The protocol keeps to NCCL's rules (one stream per rank, messages
// between a pair matched in the order started, no tags): no deadlock, no
// message met by the wrong receive, and the same bits. Clipping takes the
// roll-back path; three ranks put a rank in the middle of the chain.
TEST(ShardedGptTest, TheProtocolKeepsToNcclOrderingRules) {
  GptConfig c = Micro();
  c.grad_clip = 0.05f;
  const TrainRun one = Train(Where::kOffloaded, WithAccumulate(c, 3), kSteps);
  ExpectSameBits(TrainSharded(3, c, Where::kOffloaded, kSteps, true), one);
  c.grad_clip = 0;
  c.precision = Precision::kBf16;
  const TrainRun bf16 = Train(Where::kOffloaded, WithAccumulate(c, 2), kSteps);
  ExpectSameBits(TrainSharded(2, c, Where::kOffloaded, kSteps, true), bf16);
}

TEST(ShardedGptTest, OneShardedRankIsTheUnshardedModel) {
  const GptConfig c = Micro();
  const TrainRun one = Train(Where::kOffloaded, c, kSteps);
  ExpectSameBits(TrainSharded(1, c, Where::kOffloaded), one);
}

TEST(ShardedGptTest, MoreRanksThanEmbeddingValuesAreRefused) {
  GptConfig c = Micro();
  c.embed = 4;
  c.heads = 2;
  auto collectives = MakeThreadCollectives(8, 1.0);
  ::strata::testing::TempDir dir;
  StoreOptions so = testing::OptionsFor(Where::kHostHuge, dir.path(), c, 8);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup =
      OpenGptSetup(so, c, collectives[0].get());
  ASSERT_FALSE(setup.ok());
  EXPECT_EQ(setup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(setup.status().message(), HasSubstr("at most 4 ranks"));
}

TEST(ShardedGptTest, ARankThatNeverArrivesTimesOutAndLaterStepsAreRefused) {
  auto collectives = MakeThreadCollectives(2, 0.3);
  GptConfig c = Micro();
  ::strata::testing::TempDir dir;
  StoreOptions so = testing::OptionsFor(Where::kHostHuge, dir.path(), c, 2);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup =
      OpenGptSetup(so, c, collectives[0].get());
  ASSERT_TRUE(setup.ok()) << setup.status();
  Gpt& gpt = *(*setup)->model;
  GptConfig global = c;
  global.accumulate = 2;
  testing::Batches batches(global);
  std::vector<int32_t> in, out;
  batches.Next(&in, &out);
  // One micro-batch for two ranks is refused before anything is exchanged,
  // and the run may go on.
  EXPECT_EQ(gpt.TrainStep(in.data(), out.data(), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::StatusOr<double> step = gpt.TrainStep(in.data(), out.data(), 4);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(step.status().message(),
              HasSubstr("rank 0 waited 0.3 s for the all-gather of wte from "
                        "every other rank"));
  // The ranks' shards may now be out of step: every later pass is refused.
  const absl::Status again = gpt.TrainStep(in.data(), out.data(), 4).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("end the run"));
  EXPECT_EQ(gpt.Evaluate(in.data(), out.data(), 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace strata::train
