// train_test.cc: the training job end to end on the simulated device — loss
// falls, budgets hold, and moving tensors between tiers never changes a bit of
// the math (resident vs offloaded, host-huge vs host-tiny, prefetch on/off).
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tests/util/train_test_util.h"
#include "train/compute/compute.h"
#include "train/data/dataset.h"
#include "train/model/model.h"
#include "train/run/trainer.h"

namespace strata::train {
namespace {

using ::strata::testing::Budgets;
using ::strata::testing::LinkBytes;
using ::strata::testing::Offloaded;
using ::strata::testing::Resident;
using ::strata::testing::RunResult;
using ::strata::testing::SmallJob;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::SyntheticData;
using ::strata::testing::TempDir;
using ::strata::testing::TrainWith;

class TrainTest : public ::testing::Test {
 protected:
  const Dataset train_ = SyntheticData(512, 1);
  const Dataset test_ = SyntheticData(128, 2);
};

TEST_F(TrainTest, LossFallsAndAccuracyBeatsChance) {
  TrainOptions job = SmallJob();
  job.epochs = 4;
  const Dataset train = SyntheticData(2048, 3);
  RunResult run = TrainWith(Offloaded(), job, train, test_);
  ASSERT_EQ(run.result.epochs.size(), 4u);
  EXPECT_LT(run.result.epochs.back().mean_loss,
            0.6 * run.result.epochs.front().mean_loss);
  EXPECT_GT(run.result.test_accuracy, 0.6);  // chance is 0.25
  EXPECT_EQ(run.result.losses.size(), 4u * (2048 / 16));
  for (double loss : run.result.losses) EXPECT_TRUE(std::isfinite(loss));
}

TEST_F(TrainTest, OffloadedLossesBitwiseEqualResident) {
  const RunResult resident = TrainWith(Resident(), SmallJob(), train_, test_);
  const RunResult offloaded = TrainWith(Offloaded(), SmallJob(), train_, test_);
  ASSERT_FALSE(resident.result.losses.empty());
  EXPECT_EQ(resident.result.losses, offloaded.result.losses);
  EXPECT_EQ(resident.weights, offloaded.weights);
  EXPECT_EQ(resident.result.test_accuracy, offloaded.result.test_accuracy);
  // The offloaded run really used every tier; the resident one moved no
  // model state (only input batches go host -> device).
  EXPECT_GT(LinkBytes(offloaded.stats, Link::kNvmeRead), 0u);
  EXPECT_GT(LinkBytes(offloaded.stats, Link::kNvmeWrite), 0u);
  EXPECT_GT(LinkBytes(offloaded.stats, Link::kD2H), 0u);
  EXPECT_EQ(LinkBytes(resident.stats, Link::kNvmeRead), 0u);
  EXPECT_EQ(LinkBytes(resident.stats, Link::kD2H), 0u);
  EXPECT_GT(offloaded.stats.tiers[int(Tier::kDevice)].evictions, 0u);
}

TEST_F(TrainTest, HostTinyEqualsHostHuge) {
  Budgets huge = Offloaded();
  huge.host = 16 * kMiB;
  const RunResult big = TrainWith(huge, SmallJob(), train_, test_);
  const RunResult tiny = TrainWith(Offloaded(), SmallJob(), train_, test_);
  ASSERT_FALSE(big.result.losses.empty());
  EXPECT_EQ(big.result.losses, tiny.result.losses);
  EXPECT_EQ(big.weights, tiny.weights);
  EXPECT_EQ(LinkBytes(big.stats, Link::kNvmeRead), 0u);
  EXPECT_GT(LinkBytes(tiny.stats, Link::kNvmeRead), 0u);
}

TEST_F(TrainTest, SchedulerSettingsNeverChangeTheMath) {
  Budgets no_prefetch = Offloaded();
  no_prefetch.prefetch = false;
  Budgets lru = Offloaded();
  lru.eviction = EvictionPolicy::kLru;
  const RunResult base = TrainWith(Offloaded(), SmallJob(), train_, test_);
  const RunResult off = TrainWith(no_prefetch, SmallJob(), train_, test_);
  const RunResult l = TrainWith(lru, SmallJob(), train_, test_);
  ASSERT_FALSE(base.result.losses.empty());
  EXPECT_EQ(base.result.losses, off.result.losses);
  EXPECT_EQ(base.result.losses, l.result.losses);
  EXPECT_GT(base.stats.prefetch.issued, 0u);
  EXPECT_EQ(off.stats.prefetch.issued, 0u);
}

TEST_F(TrainTest, UnifiedMemoryLossesBitwiseEqualResident) {
  Budgets hints = Offloaded();
  hints.memory = DeviceMemory::kUnified;
  Budgets faults = hints;
  faults.unified_hints = false;
  const RunResult resident = TrainWith(Resident(), SmallJob(), train_, test_);
  const RunResult um = TrainWith(hints, SmallJob(), train_, test_);
  const RunResult um_faults = TrainWith(faults, SmallJob(), train_, test_);
  ASSERT_FALSE(resident.result.losses.empty());
  EXPECT_EQ(resident.result.losses, um.result.losses);
  EXPECT_EQ(resident.result.losses, um_faults.result.losses);
  EXPECT_EQ(resident.weights, um.weights);
  EXPECT_EQ(um.stats.device_memory, "unified");
  EXPECT_GT(um.stats.unified.prefetches, 0u);
  EXPECT_GT(um.stats.unified.discards, 0u);  // activations after last use
  EXPECT_EQ(um_faults.stats.unified.prefetches, 0u);
  EXPECT_GT(um_faults.stats.unified.faults, 0u);
  EXPECT_LE(um.stats.tiers[0].peak_used_bytes, 80u * 1024);
}

TEST_F(TrainTest, PeakDeviceBytesStayWithinBudget) {
  const Budgets b = Offloaded();
  const RunResult run = TrainWith(b, SmallJob(), train_, test_);
  const TierStats& dev = run.stats.tiers[int(Tier::kDevice)];
  const TierStats& host = run.stats.tiers[int(Tier::kHost)];
  ASSERT_GT(dev.peak_used_bytes, 0u);
  EXPECT_LE(dev.peak_used_bytes, b.device);
  EXPECT_LE(host.peak_used_bytes, b.host);
  absl::StatusOr<ModelFootprint> f = ComputeFootprint(SmallJob().model);
  ASSERT_TRUE(f.ok());
  // The model state is several times the device budget: it had to move.
  EXPECT_GT(f->state_bytes(), 2 * b.device);
}

// Evaluation drops a layer's activations once nothing reads them: an
// offloaded evaluation then writes almost none back (kept, they filled the
// device and left it as write-backs). Nothing is updated: the same loss
// twice.
TEST_F(TrainTest, EvaluationWritesNoActivationBack) {
  TempDir dir;
  TrainOptions job = SmallJob();
  job.model.batch = 256;  // 64 KiB per hidden activation
  job.model.depth = 8;
  // A layer's working set fits the device; the whole forward's activations
  // (16 x 64 KiB) do not.
  StoreOptions so =
      SmallStoreOptions(dir.path(), 320 * 1024, 4 * kMiB, 16 * kMiB);
  so.scheduler.prefetch = false;  // evictions on demand only: deterministic
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
  ASSERT_TRUE(store.ok()) << store.status();
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  absl::StatusOr<std::unique_ptr<Mlp>> model =
      Mlp::Create(store->get(), compute.get(), job.model);
  ASSERT_TRUE(model.ok()) << model.status();
  auto evaluate = [&] {
    return (*model)->Evaluate(train_.images.data(), train_.labels.data(), 256);
  };
  absl::StatusOr<LossResult> first = evaluate();
  ASSERT_TRUE(first.ok()) << first.status();
  const uint64_t before = (*store)->GetStats().write_backs;
  absl::StatusOr<LossResult> again = evaluate();
  ASSERT_TRUE(again.ok()) << again.status();
  // What is left (4) is a lease group's retry on the fragmented device that
  // pushes out its own members; kept, the activations made 14.
  EXPECT_LT((*store)->GetStats().write_backs - before,
            uint64_t(job.model.depth));
  EXPECT_EQ(first->loss_sum, again->loss_sum);
  EXPECT_EQ(first->correct, again->correct);
}

TEST_F(TrainTest, BudgetBelowWorkingSetIsAClearError) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(SmallStoreOptions(dir.path(), 16 * 1024, kMiB, 8 * kMiB));
  ASSERT_TRUE(store.ok()) << store.status();
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  absl::StatusOr<std::unique_ptr<Mlp>> model =
      Mlp::Create(store->get(), compute.get(), SmallJob().model);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(model.status().message().find("--device-budget"), std::string::npos)
      << model.status();
  EXPECT_EQ((*store)->GetStats().tensors, 0u);  // nothing left behind
}

TEST(TrainConfigTest, NonsenseSizesAreRejected) {
  ModelConfig c;
  c.width = 0;
  EXPECT_EQ(ComputeFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.depth = 0;
  EXPECT_EQ(ComputeFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.width = int64_t{1} << 40;
  EXPECT_EQ(ComputeFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.optimizer_tier = Tier::kNvme;
  EXPECT_EQ(ComputeFootprint(c).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TrainConfigTest, FootprintOfTheLargeConfiguration) {
  ModelConfig c;
  c.width = 4096;
  c.depth = 16;
  absl::StatusOr<ModelFootprint> f = ComputeFootprint(c);
  ASSERT_TRUE(f.ok());
  // 784*4096 + 15*4096^2 + 4096*10 weights, plus biases, in float32.
  const uint64_t weights =
      (784ull * 4096 + 15ull * 4096 * 4096 + 4096 * 10 + 16 * 4096 + 10) * 4;
  EXPECT_EQ(f->parameter_bytes, weights);
  EXPECT_EQ(f->state_bytes(), 4 * weights);
  EXPECT_GT(f->state_bytes(), 15 * (256 * kMiB));
}

TEST(TrainRealDataTest, ShortRunOnFashionMnistLearns) {
  absl::StatusOr<FashionMnist> data = LoadFashionMnist();
  if (!data.ok())
    GTEST_SKIP() << "Fashion-MNIST not installed: " << data.status();
  TrainOptions job;
  job.model.width = 128;
  job.model.depth = 2;
  job.model.batch = 128;
  job.max_steps = 60;
  TempDir dir;
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(SmallStoreOptions(dir.path(), 2 * kMiB, 2 * kMiB, 16 * kMiB));
  ASSERT_TRUE(store.ok()) << store.status();
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  absl::StatusOr<std::unique_ptr<Mlp>> model =
      Mlp::Create(store->get(), compute.get(), job.model);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<TrainResult> r = Train(**model, data->train, data->test, job);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->losses.size(), 60u);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += r->losses[i], last += r->losses[50 + i];
  EXPECT_LT(last, 0.6 * first);
  EXPECT_GT(r->test_accuracy, 0.7);  // after 60 steps; chance is 0.1
}

}  // namespace
}  // namespace strata::train
