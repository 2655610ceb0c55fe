// optimizer_stream_test.cc: the host optimizer working through a weight in
// parts (optimizer_parts.h, mlp_optimizer.cc) — the parts tile a tensor, a
// host budget below one layer's whole update streams instead of refusing,
// and streamed, whole-leased and resident runs give the same bits in fp32,
// fp16 and bf16 with stochastic rounding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "strata/status.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tests/util/train_test_util.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/half.h"
#include "train/model/footprint.h"
#include "train/model/model.h"
#include "train/model/optimizer_parts.h"

namespace strata::train {
namespace {

using ::strata::testing::Budgets;
using ::strata::testing::LinkBytes;
using ::strata::testing::RunResult;
using ::strata::testing::SyntheticData;
using ::strata::testing::TrainWith;
using ::testing::HasSubstr;

constexpr int64_t P = kOptimizerPartElements;

TEST(OptimizerPartsTest, PartsTileTheTensorInOrder) {
  for (int64_t n : {int64_t{1}, P - 1, P, P + 1, 3 * P + 5}) {
    const std::vector<OptimizerPart> parts = OptimizerParts(n);
    ASSERT_EQ(parts.size(), static_cast<size_t>((n + P - 1) / P)) << n;
    int64_t next = 0;
    for (const OptimizerPart& part : parts) {
      EXPECT_EQ(part.first, next);
      EXPECT_GT(part.count, 0);
      EXPECT_LE(part.count, P);
      next += part.count;
    }
    EXPECT_EQ(next, n);
  }
  EXPECT_EQ(OptimizerPartName("layer1.weight.adam_m", 0, 1),
            "layer1.weight.adam_m");
  EXPECT_EQ(OptimizerPartName("layer1.weight.adam_m", 2, 3),
            "layer1.weight.adam_m.part2");
}

// 32 -> 1536 x 2 -> 4: the middle weight is 9 MiB, three parts (the last a
// quarter), so one whole update (weight, gradient, two moment parts) needs
// 26 MiB on the host beside a 9 MiB free range.
TrainOptions WideJob(Precision precision = Precision::kFp32,
                     Rounding rounding = Rounding::kNearestEven) {
  TrainOptions o = ::strata::testing::SmallJob();
  o.model.width = 1536;
  o.model.depth = 2;
  o.model.precision = precision;
  o.model.rounding = rounding;
  o.max_steps = 6;
  return o;
}

Budgets Streamed() {
  return {.device = 32 * kMiB, .host = 24 * kMiB, .nvme = 64 * kMiB};
}
Budgets WholeOnHost() {
  return {.device = 32 * kMiB, .host = 48 * kMiB, .nvme = 64 * kMiB};
}
Budgets WideResident() {
  return {.device = 96 * kMiB,
          .host = 16 * kMiB,
          .nvme = 0,
          .home = Tier::kDevice,
          .optimizer = Tier::kDevice};
}

class OptimizerStreamTest : public ::testing::Test {
 protected:
  void ExpectSameBits(const RunResult& a, const RunResult& b) {
    ASSERT_FALSE(a.result.losses.empty());
    EXPECT_EQ(a.result.losses, b.result.losses);
    EXPECT_EQ(a.weights, b.weights);
    EXPECT_EQ(a.adam_steps, b.adam_steps);
  }
  // An Mlp of `config` in a fresh store: 32 MiB device, `host` bytes of
  // host, 64 MiB NVMe.
  absl::StatusOr<std::unique_ptr<Mlp>> Create(uint64_t host,
                                              const ModelConfig& config) {
    STRATA_ASSIGN_OR_RETURN(store_,
                            Store::Open(::strata::testing::SmallStoreOptions(
                                dir_.path(), 32 * kMiB, host, 64 * kMiB)));
    return Mlp::Create(store_.get(), compute_.get(), config);
  }
  const Dataset train_ = SyntheticData(256, 1);
  const Dataset test_ = SyntheticData(64, 2);
  ::strata::testing::TempDir dir_;
  std::unique_ptr<Compute> compute_ = MakeCpuCompute(1);
  std::unique_ptr<Store> store_;
};

TEST_F(OptimizerStreamTest, StreamedFp32IsBitwiseWholeAndResident) {
  const RunResult streamed = TrainWith(Streamed(), WideJob(), train_, test_);
  const RunResult whole = TrainWith(WholeOnHost(), WideJob(), train_, test_);
  const RunResult resident =
      TrainWith(WideResident(), WideJob(), train_, test_);
  EXPECT_TRUE(streamed.optimizer_streamed);
  EXPECT_FALSE(whole.optimizer_streamed);
  EXPECT_FALSE(resident.optimizer_streamed);
  ExpectSameBits(streamed, whole);
  ExpectSameBits(streamed, resident);
  // Each step's weights cross to the host and back a part at a time, and
  // the gradient once: more than the whole-leased run's single h2d.
  EXPECT_GT(LinkBytes(streamed.stats, Link::kD2H),
            LinkBytes(whole.stats, Link::kD2H));
}

TEST_F(OptimizerStreamTest, StreamedMixedPrecisionIsBitwiseResident) {
  for (const auto& [precision, rounding] :
       {std::pair{Precision::kFp16, Rounding::kNearestEven},
        std::pair{Precision::kBf16, Rounding::kStochastic}}) {
    SCOPED_TRACE(PrecisionName(precision));
    const TrainOptions job = WideJob(precision, rounding);
    // Mixed, whole: three 4 MiB parts (master, moments) beside the 16-bit
    // gradient and weight, 4.5 MiB each, and a 9 MiB free range: 30 MiB.
    // Streamed: 20 MiB.
    const RunResult s = TrainWith(Streamed(), job, train_, test_);
    const RunResult r = TrainWith(WideResident(), job, train_, test_);
    EXPECT_TRUE(s.optimizer_streamed);
    ExpectSameBits(s, r);
    EXPECT_EQ(s.skipped_steps, r.skipped_steps);
  }
}

// The parts of one tensor round as one cast would: element i of the
// 16-bit weight is the stochastic rounding of its master weight drawn from
// (the tensor's seed, i), whichever part it was updated in.
TEST_F(OptimizerStreamTest, StochasticRoundingFollowsTheElementNotThePart) {
  TrainOptions job = WideJob(Precision::kBf16, Rounding::kStochastic);
  job.max_steps = 2;
  auto model = Create(24 * kMiB, job.model);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->streams_optimizer());
  ASSERT_TRUE(Train(**model, train_, test_, job).ok());
  ASSERT_EQ((*model)->steps(), 2);
  std::vector<float> master;
  ASSERT_TRUE((*model)->ReadWeights(1, &master).ok());
  ASSERT_EQ(master.size(), 1536u * 1536);
  TensorId w16_id;
  for (TensorId id : (*model)->StateTensors()) {
    if (store_->GetSpec(id)->name == "layer1.weight") w16_id = id;
  }
  std::vector<uint16_t> w16(master.size()), expect(master.size());
  ASSERT_TRUE(store_->Read(w16_id, w16.data(), w16.size() * 2).ok());
  // Layer 1's weight is tensor 2 (mlp_backward.cc FinishMixedStep); the last
  // update was the one after step 1.
  const RoundingMode mode{.rounding = Rounding::kStochastic,
                          .seed = StochasticSeed(job.model.seed, 2, 1)};
  CastToHalfCpu(Precision::kBf16, mode, master.data(), expect.data(),
                master.size());
  EXPECT_EQ(w16, expect);
}

TEST_F(OptimizerStreamTest, TooSmallAHostBudgetNamesTheStreamedNeed) {
  auto model = Create(12 * kMiB, WideJob().model);
  ASSERT_EQ(model.status().code(), absl::StatusCode::kResourceExhausted);
  // Four 4 MiB parts and one part's free range: 20 MiB, not the 35 MiB of
  // a whole update.
  EXPECT_THAT(model.status().message(), HasSubstr("streamed optimizer"));
  EXPECT_THAT(model.status().message(),
              HasSubstr("--host-budget to at least 20 MiB"));
}

TEST_F(OptimizerStreamTest, StateTensorsAreTheParts) {
  auto model = Create(24 * kMiB, WideJob().model);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> names;
  uint64_t moment_bytes = 0;
  for (TensorId id : (*model)->StateTensors()) {
    const TensorSpec spec = *store_->GetSpec(id);
    names.push_back(spec.name);
    if (spec.name.find("layer1.weight.adam_") == 0) {
      moment_bytes += spec.size_bytes;
    }
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf(
                         {"layer0.weight.adam_m", "layer1.weight.adam_m.part0",
                          "layer1.weight.adam_v.part2", "layer1.bias.adam_v"}));
  EXPECT_THAT(names,
              ::testing::Not(::testing::Contains("layer1.weight.adam_m")));
  EXPECT_EQ(moment_bytes, 2u * 1536 * 1536 * 4);
}

}  // namespace
}  // namespace strata::train
