// gpt_test.cc: the GPT end to end on the simulated device — its loss falls
// on a repetitive text, an offloaded run (tiny budgets, NVMe) gives the
// losses and weights of a resident one bit for bit, clipped steps roll back
// exactly, and bad input is refused with nothing changed.
#include "train/model/gpt.h"

#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/gpt_test_util.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/model/gpt_config.h"
#include "train/run/gpt_setup.h"

namespace strata::train {
namespace {

using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using ::strata::train::testing::Batches;
using ::strata::train::testing::Micro;
using ::strata::train::testing::OptionsFor;
using ::strata::train::testing::Train;
using ::strata::train::testing::TrainRun;
using ::strata::train::testing::Where;

TEST(GptTest, LossFallsOnARepetitiveText) {
  GptConfig c = Micro();
  const TrainRun run = Train(Where::kOffloaded, c, 40);
  ASSERT_EQ(run.losses.size(), 40u);
  EXPECT_NEAR(run.losses.front(), std::log(256.0), 0.3);  // uniform at init
  EXPECT_LT(run.losses.back(), 0.5 * run.losses.front());
  EXPECT_EQ(run.clip.steps, 40);  // a clipped step is re-run, not skipped
  for (double l : run.losses) EXPECT_TRUE(std::isfinite(l));
}

TEST(GptTest, OffloadedRunIsBitwiseTheResidentOne) {
  const TrainRun resident = Train(Where::kResident, Micro(), 6);
  const TrainRun offloaded = Train(Where::kOffloaded, Micro(), 6);
  ASSERT_EQ(resident.losses.size(), 6u);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.wte, offloaded.wte);
  EXPECT_EQ(resident.qkv, offloaded.qkv);
  // The offloaded run really moved: its state is beyond the device budget
  // and NVMe was read.
  const auto& dev = offloaded.stats.tiers[int(Tier::kDevice)];
  EXPECT_GT(offloaded.state_bytes, 2 * dev.capacity_bytes);
  EXPECT_LE(dev.peak_used_bytes, dev.capacity_bytes);
  EXPECT_GT(offloaded.stats.links[int(Link::kNvmeRead)].bytes, 0u);
}

TEST(GptTest, CheckpointedBlocksRecomputeTheSameBits) {
  GptConfig c = Micro();
  c.grad_clip = 2.0f;  // re-run steps recompute too
  const TrainRun resident = Train(Where::kResident, c, 4);
  c.checkpoint = ActivationCheckpointing::kBlock;
  const TrainRun block = Train(Where::kOffloaded, c, 4);
  c.checkpoint = ActivationCheckpointing::kOffload;
  const TrainRun offload = Train(Where::kOffloaded, c, 4);
  ASSERT_EQ(resident.losses.size(), 4u);
  EXPECT_EQ(resident.losses, block.losses);
  EXPECT_EQ(resident.losses, offload.losses);
  EXPECT_EQ(resident.wte, offload.wte);
  EXPECT_EQ(resident.qkv, block.qkv);
  EXPECT_EQ(resident.recompute_seconds, 0);
  EXPECT_GT(block.recompute_seconds, 0);
  EXPECT_GT(offload.recompute_seconds, 0);
  EXPECT_GT(offload.clip.rolled_back + offload.clip.deferred, 0);
  // Without checkpointing every block keeps its fc and GELU outputs
  // (2 x N x 4C floats) until backward; with it only the block being
  // recomputed holds them.
  const uint64_t fc_gelu = 2 * c.tokens() * 4 * c.embed * sizeof(float);
  EXPECT_GT(block.peak_activation_bytes, 0u);
  EXPECT_GE(resident.peak_activation_bytes,
            block.peak_activation_bytes + (c.layers - 1) * fc_gelu);
  EXPECT_EQ(offload.peak_activation_bytes, block.peak_activation_bytes);
  // The training steps' traffic is counted: offloaded, the weights cross to
  // the device every step (4 steps of at least the model's parameters);
  // resident, nothing crosses a link.
  EXPECT_GE(block.train_link_bytes[int(Link::kH2D)],
            4 * GptParameterCount(c) * sizeof(float));
  EXPECT_EQ(resident.train_link_bytes[int(Link::kH2D)], 0u);
}

TEST(GptTest, OffloadCheckpointingNeedsAnOffloadedRun) {
  GptConfig c = Micro();
  c.checkpoint = ActivationCheckpointing::kOffload;
  c.home = Tier::kDevice;
  c.classifier_rows = 1;
  const absl::Status s = ComputeGptFootprint(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--checkpoint=block"), std::string::npos) << s;
}

TEST(GptTest, HostBudgetDoesNotChangeABit) {
  const TrainRun huge = Train(Where::kHostHuge, Micro(), 4);
  const TrainRun tiny = Train(Where::kOffloaded, Micro(), 4);
  ASSERT_EQ(huge.losses.size(), 4u);
  EXPECT_EQ(huge.losses, tiny.losses);
  EXPECT_EQ(huge.wte, tiny.wte);
}

TEST(GptTest, ClippedStepsRollBackAndMatchResidentBits) {
  GptConfig c = Micro();
  c.grad_clip = 2.0f;  // the norms here are 2.6 to 4.9: every step clips
  const TrainRun resident = Train(Where::kResident, c, 4);
  const TrainRun offloaded = Train(Where::kOffloaded, c, 4);
  ASSERT_EQ(offloaded.losses.size(), 4u);
  // The first clipped step rolls back; the ones after it are deferred.
  EXPECT_EQ(offloaded.clip.clipped, 4);
  EXPECT_EQ(offloaded.clip.rolled_back, 1);
  EXPECT_EQ(offloaded.clip.deferred, 3);
  EXPECT_EQ(offloaded.clip.steps, 4);
  EXPECT_GT(offloaded.clip.last_norm, 2.0);
  EXPECT_EQ(resident.losses, offloaded.losses);
  EXPECT_EQ(resident.wte, offloaded.wte);
  EXPECT_EQ(resident.qkv, offloaded.qkv);
  // Clipping changed the trajectory: not the unclipped run's weights.
  GptConfig off = Micro();
  off.grad_clip = 0;
  const TrainRun unclipped = Train(Where::kOffloaded, off, 4);
  EXPECT_NE(unclipped.qkv, offloaded.qkv);
  EXPECT_EQ(unclipped.clip.clipped, 0);
  // Within the limit, the speculative updates are the unclipped ones.
  const TrainRun within = Train(Where::kOffloaded, Micro(), 4);
  EXPECT_EQ(within.clip.clipped, 0) << "raise Micro's grad_clip";
  EXPECT_EQ(within.qkv, unclipped.qkv);
  EXPECT_EQ(within.losses, unclipped.losses);
}

// Evaluation reads a block's activations only in that block: they are
// dropped once the next block's input is made, so an offloaded evaluation
// writes back almost nothing (kept, they filled the device and left it as
// write-backs nothing reads). Nothing is updated: the same loss twice.
TEST(GptTest, EvaluationWritesNoActivationBack) {
  TempDir dir;
  GptConfig c = Micro();
  c.layers = 8;
  StoreOptions so = OptionsFor(Where::kOffloaded, dir.path(), c);
  so.scheduler.prefetch = false;  // evictions on demand only: deterministic
  absl::StatusOr<std::unique_ptr<GptSetup>> setup = OpenGptSetup(so, c);
  ASSERT_TRUE(setup.ok()) << setup.status();
  Gpt& gpt = *(*setup)->model;
  Batches batches(c);
  std::vector<int32_t> in, out;
  batches.Next(&in, &out);
  ASSERT_TRUE(gpt.TrainStep(in.data(), out.data(), c.step_sequences()).ok());
  batches.Next(&in, &out);
  Store& store = *(*setup)->store;
  // The first evaluation also writes back weights the optimizer left dirty
  // on the host that it pushes out; the second finds them clean.
  absl::StatusOr<double> first =
      gpt.Evaluate(in.data(), out.data(), c.step_sequences());
  ASSERT_TRUE(first.ok()) << first.status();
  const uint64_t before = store.GetStats().write_backs;
  absl::StatusOr<double> again =
      gpt.Evaluate(in.data(), out.data(), c.step_sequences());
  ASSERT_TRUE(again.ok()) << again.status();
  // What is left happens inside a block: on this tight device budget a later
  // operation pushes out an earlier one's output (7 here). Kept, the eight
  // blocks' activations made 70.
  EXPECT_LT(store.GetStats().write_backs - before, uint64_t(c.layers));
  EXPECT_EQ(*first, *again);
}

TEST(GptTest, ABadTokenIsRefusedAndNothingMoves) {
  TempDir dir;
  GptConfig c = Micro();
  StoreOptions so = OptionsFor(Where::kOffloaded, dir.path(), c);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup = OpenGptSetup(so, c);
  ASSERT_TRUE(setup.ok()) << setup.status();
  Gpt& gpt = *(*setup)->model;
  std::vector<float> before, after;
  ASSERT_TRUE(gpt.ReadParameter("wte", &before).ok());
  std::vector<int32_t> in(c.tokens(), 1), out(c.tokens(), 2);
  in[7] = 256;
  absl::StatusOr<double> loss = gpt.TrainStep(in.data(), out.data(), c.batch);
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loss.status().message().find("256"), std::string::npos);
  EXPECT_EQ(gpt.TrainStep(in.data(), out.data(), 3).status().code(),
            absl::StatusCode::kInvalidArgument);  // more than --batch
  EXPECT_EQ(gpt.steps(), 0);
  ASSERT_TRUE(gpt.ReadParameter("wte", &after).ok());
  EXPECT_EQ(before, after);
}

TEST(GptTest, TooSmallABudgetNamesTheFlag) {
  TempDir dir;
  GptConfig c = Micro();
  StoreOptions so =
      SmallStoreOptions(dir.path(), 64 * 1024, 8 * kMiB, 64 * kMiB);
  absl::StatusOr<std::unique_ptr<GptSetup>> setup = OpenGptSetup(so, c);
  ASSERT_EQ(setup.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(setup.status().message().find("--device-budget"), std::string::npos)
      << setup.status();
}

TEST(GptTest, TheDeviceBudgetNamedIsEnoughWhenGiven) {
  // The classifier's slice follows the budget: the budget named must hold
  // the slice chosen for it, not only the one that failed.
  TempDir dir;
  GptConfig c = Micro();
  c.classifier_rows = 0;  // chosen from the budget
  c.vocab = 4096;
  StoreOptions so =
      SmallStoreOptions(dir.path(), 256 * 1024, 64 * kMiB, 256 * kMiB);
  GptConfig tried = c;
  absl::StatusOr<std::unique_ptr<GptSetup>> small = OpenGptSetup(so, tried);
  ASSERT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string m(small.status().message());
  const size_t at = m.find("--device-budget to at least ");
  ASSERT_NE(at, std::string::npos) << m;
  const double mib = std::stod(m.substr(at + 28));
  ASSERT_GT(mib, 0.25) << m;
  so.device.budget_bytes = static_cast<uint64_t>(mib * kMiB);
  tried = c;
  absl::StatusOr<std::unique_ptr<GptSetup>> named = OpenGptSetup(so, tried);
  EXPECT_TRUE(named.ok()) << named.status();
}

TEST(GptTest, BadShapesAreInvalidArgument) {
  GptConfig c = Micro();
  c.heads = 3;  // does not divide 64
  c.classifier_rows = 1;
  EXPECT_EQ(ComputeGptFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c = Micro();
  c.classifier_rows = 1;
  c.layers = 0;
  EXPECT_EQ(ComputeGptFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GptTest, ParameterCountIsGpt2Small) {
  GptConfig c;
  c.layers = 12, c.heads = 12, c.embed = 768, c.context = 1024;
  c.vocab = 50257;
  // GPT-2 small's published count: 124,439,808 (tied embedding once).
  EXPECT_EQ(GptParameterCount(c), 124'439'808);
}

}  // namespace
}  // namespace strata::train
