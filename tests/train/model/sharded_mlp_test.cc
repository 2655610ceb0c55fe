// sharded_mlp_test.cc: sharded data parallelism (collectives.h,
// model_sharding.cc) with ranks as threads of the test — shard offsets, the
// thread transport, and N-rank runs bit for bit equal to one unsharded rank
// with N x accumulate micro-batches; the refusals and a rank that never
// arrives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "strata/status.h"
#include "tests/util/test_util.h"
#include "tests/util/train_test_util.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/model/footprint.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

using ::strata::testing::Budgets;
using ::strata::testing::RunResult;
using ::strata::testing::SyntheticData;
using ::strata::testing::TrainWith;
using ::testing::HasSubstr;

TEST(ShardOffsetsTest, ShardsTileInRankOrderWithinOneOfEachOther) {
  for (int ranks : {1, 2, 3, 7}) {
    for (int64_t n : {int64_t{7}, int64_t{64}, int64_t{1000003}}) {
      const std::vector<int64_t> at = ShardOffsets(n, ranks);
      ASSERT_EQ(at.size(), static_cast<size_t>(ranks + 1));
      EXPECT_EQ(at.front(), 0);
      EXPECT_EQ(at.back(), n);
      for (int r = 0; r < ranks; ++r) {
        const int64_t size = at[r + 1] - at[r];
        EXPECT_GE(size, n / ranks) << n << " / " << ranks;
        EXPECT_LE(size, n / ranks + 1) << n << " / " << ranks;
      }
    }
  }
}

TEST(ThreadCollectivesTest, AllGatherSendAndReceive) {
  auto c = MakeThreadCollectives(3, 10.0);
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(6, -1));
  std::vector<int32_t> received(3, -1);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      // Rank r contributes r + 1 values (1, 2, 3 of them: 6 in all).
      std::vector<int32_t> mine(r + 1, 10 * r);
      const std::vector<uint64_t> offsets = {0, 4, 12, 24};
      auto g = c[r]->StartAllGather(mine.data(), got[r].data(), offsets, "g");
      ASSERT_TRUE(g.ok()) << g.status();
      const int32_t value = 100 + r;
      auto s = c[r]->StartSend((r + 1) % 3, 5, &value, 4, "s");
      auto v = c[r]->StartRecv((r + 2) % 3, 5, &received[r], 4, "v");
      ASSERT_TRUE(s.ok() && v.ok());
      EXPECT_TRUE(c[r]->Wait(*g).ok());
      EXPECT_TRUE(c[r]->Wait(*s).ok());
      EXPECT_TRUE(c[r]->Wait(*v).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(got[r], ::testing::ElementsAre(0, 10, 10, 20, 20, 20)) << r;
    EXPECT_EQ(received[r], 100 + (r + 2) % 3);
    // 4 x r + 4 bytes to each of two others, 4 sent.
    EXPECT_EQ(c[r]->bytes_sent(), (4 * (r + 1)) * 2 + 4u);
  }
}

// Counts the waits it passes on to `inner`.
class CountingCollectives : public Collectives {
 public:
  explicit CountingCollectives(Collectives* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string& what) override {
    return inner_->StartAllGather(mine, all, offsets, what);
  }
  absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    return inner_->StartSend(to, tag, data, bytes, what);
  }
  absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    return inner_->StartRecv(from, tag, data, bytes, what);
  }
  absl::Status Wait(Request request) override {
    ++waits;
    return inner_->Wait(request);
  }
  uint64_t bytes_sent() const override { return inner_->bytes_sent(); }
  int waits = 0;

 private:
  Collectives* const inner_;
};

// A peer that never sends costs one timeout, not one per request waited
// for (each Wait has a deadline of its own).
TEST(ThreadCollectivesTest, WaitAllStopsAtTheFirstTimeout) {
  auto c = MakeThreadCollectives(2, 0.1);
  CountingCollectives counting(c[0].get());
  std::vector<int32_t> in(3);
  std::vector<Collectives::Request> requests;
  for (int i = 0; i < 3; ++i) {
    auto r = counting.StartRecv(1, i, &in[i], 4, "never sent");
    ASSERT_TRUE(r.ok()) << r.status();
    requests.push_back(*r);
  }
  const absl::Status s = WaitAll(counting, requests);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(counting.waits, 1);
  EXPECT_TRUE(requests.empty());
}

TEST(ThreadCollectivesTest, WrongSizeIsDataLossAndSilenceTimesOut) {
  auto c = MakeThreadCollectives(2, 0.2);
  const int64_t eight = 8;
  ASSERT_TRUE(c[0]->StartSend(1, 0, &eight, 8, "eight").ok());
  int32_t four = 0;
  auto r = c[1]->StartRecv(0, 0, &four, 4, "four");
  ASSERT_TRUE(r.ok());
  const absl::Status size = c[1]->Wait(*r);
  EXPECT_EQ(size.code(), absl::StatusCode::kDataLoss) << size;
  auto never = c[1]->StartRecv(0, 1, &four, 4, "the gradient sum");
  ASSERT_TRUE(never.ok());
  const absl::Status late = c[1]->Wait(*never);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_THAT(late.message(), HasSubstr("the gradient sum from rank 0"));
  EXPECT_EQ(c[0]->StartSend(0, 0, &eight, 8, "self").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Small budgets, so shards, moments and activations move through NVMe.
Budgets Sharded() {
  return {.device = 512 * 1024, .host = 256 * 1024, .nvme = 16 * kMiB};
}

TrainOptions Job(int accumulate) {
  TrainOptions o = ::strata::testing::SmallJob();
  o.model.accumulate = accumulate;
  o.max_steps = 6;
  return o;
}

// `ranks` threads train `job` sharded; rank 0's result (every rank's losses
// and gathered weights are checked equal to it).
// With `nccl_order`, under NCCL's ordering rules
// (MakeStreamOrderedCollectives).
RunResult TrainSharded(int ranks, const TrainOptions& job, const Dataset& train,
                       const Dataset& test, const Budgets& budgets = Sharded(),
                       bool nccl_order = false) {
  auto c = nccl_order ? MakeStreamOrderedCollectives(ranks, 10.0)
                      : MakeThreadCollectives(ranks, 60.0);
  std::vector<RunResult> runs(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back(
        [&, r] { runs[r] = TrainWith(budgets, job, train, test, c[r].get()); });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(runs[r].result.losses, runs[0].result.losses) << r;
    EXPECT_EQ(runs[r].weights, runs[0].weights) << r;
  }
  return runs[0];
}

class ShardedMlpTest : public ::testing::Test {
 protected:
  void ExpectSameBits(const RunResult& a, const RunResult& b) {
    ASSERT_EQ(a.result.losses.size(), 6u);
    EXPECT_EQ(a.result.losses, b.result.losses);
    EXPECT_EQ(a.weights, b.weights);
    EXPECT_EQ(a.result.test_accuracy, b.result.test_accuracy);
  }
  const Dataset train_ = SyntheticData(384, 1);
  const Dataset test_ = SyntheticData(64, 2);
};

TEST_F(ShardedMlpTest, TwoRanksAreBitwiseOneRankWithTwiceTheMicroBatches) {
  const RunResult one = TrainWith(Sharded(), Job(2), train_, test_);
  const RunResult two = TrainSharded(2, Job(1), train_, test_);
  ExpectSameBits(one, two);
  // Each rank keeps half of every tensor: its NVMe holds less.
  EXPECT_LT(two.stats.tiers[2].peak_used_bytes,
            one.stats.tiers[2].peak_used_bytes);
}

TEST_F(ShardedMlpTest, ThreeRanksWithAccumulationMatchSixMicroBatches) {
  // 64-wide layers over 3 ranks: shards of 21 and 22 elements.
  ExpectSameBits(TrainWith(Sharded(), Job(6), train_, test_),
                 TrainSharded(3, Job(2), train_, test_));
}

// The protocol keeps to NCCL's rules (one stream per rank, messages
// between a pair matched in the order started, no tags): three ranks put
// one in the middle of the chain; bf16 adds the non-finite counts' exchange.
TEST_F(ShardedMlpTest, TheProtocolKeepsToNcclOrderingRules) {
  ExpectSameBits(TrainWith(Sharded(), Job(6), train_, test_),
                 TrainSharded(3, Job(2), train_, test_, Sharded(), true));
  TrainOptions bf16 = Job(1), reference = Job(2);
  bf16.model.precision = reference.model.precision = Precision::kBf16;
  ExpectSameBits(TrainWith(Sharded(), reference, train_, test_),
                 TrainSharded(2, bf16, train_, test_, Sharded(), true));
}

TEST_F(ShardedMlpTest, OneShardedRankIsTheUnshardedModel) {
  std::unique_ptr<Collectives> local = MakeLocalCollectives();
  ExpectSameBits(TrainWith(Sharded(), Job(1), train_, test_),
                 TrainWith(Sharded(), Job(1), train_, test_, local.get()));
}

TEST_F(ShardedMlpTest, ActivationCheckpointingShardsToTheSameBits) {
  TrainOptions job = Job(1);
  job.model.checkpoint = ActivationCheckpointing::kBlock;
  TrainOptions reference = Job(2);
  reference.model.checkpoint = ActivationCheckpointing::kBlock;
  ExpectSameBits(TrainWith(Sharded(), reference, train_, test_),
                 TrainSharded(2, job, train_, test_));
}

// What one rank must hold on the device: its working set and the slack
// beside leased copies (footprint.cc's check).
uint64_t DeviceNeed(const ModelFootprint& f) {
  return f.device_working_set_bytes + f.largest_device_tensor_bytes;
}

TEST_F(ShardedMlpTest, ARankTrainsAtTheDeviceBudgetItsFootprintNames) {
  const TrainOptions job = Job(1);
  const absl::StatusOr<ModelFootprint> whole = ComputeFootprint(job.model);
  const absl::StatusOr<ModelFootprint> two = ComputeFootprint(job.model, 2);
  const absl::StatusOr<ModelFootprint> four = ComputeFootprint(job.model, 4);
  ASSERT_TRUE(whole.ok() && two.ok() && four.ok());
  // A rank's state shrinks with the ranks; its device need does not (the
  // gather slots hold whole layers), but it is the slots and one layer's
  // activations, not an unsharded layer's working set on top of the slots.
  EXPECT_LT(four->state_bytes(), two->state_bytes());
  EXPECT_LT(two->state_bytes(), whole->state_bytes());
  EXPECT_EQ(DeviceNeed(*four), DeviceNeed(*two));
  EXPECT_LT(DeviceNeed(*two),
            whole->device_working_set_bytes + two->gather_slot_bytes);
  Budgets at_need = Sharded();
  at_need.device = DeviceNeed(*two);
  const RunResult run = TrainSharded(2, job, train_, test_, at_need);
  ASSERT_EQ(run.result.losses.size(), 6u);
  // Within the budget, and above the slots alone: the need is not loose.
  EXPECT_LE(run.stats.tiers[0].peak_used_bytes, at_need.device);
  EXPECT_GT(run.stats.tiers[0].peak_used_bytes, two->gather_slot_bytes);
}

// A sixteen-bit job: bf16 rounding `r`, or fp16 with a loss scale high
// enough that the first steps overflow and are skipped — at 2^20 in some
// ranks' shards only, so the ranks must agree to skip.
TrainOptions Mixed(int accumulate, Precision p, Rounding r) {
  TrainOptions o = Job(accumulate);
  o.model.precision = p;
  o.model.rounding = r;
  o.model.loss_scale.initial_scale = 1048576.0f;  // 2^20
  return o;
}

TEST_F(ShardedMlpTest,
       SixteenBitShardsAreBitwiseOneRankWithTwiceTheMicroBatches) {
  struct Case {
    Precision p;
    Rounding r;
  };
  for (const Case c : {Case{Precision::kBf16, Rounding::kNearestEven},
                       Case{Precision::kBf16, Rounding::kStochastic},
                       Case{Precision::kFp16, Rounding::kNearestEven}}) {
    SCOPED_TRACE(PrecisionName(c.p));
    const RunResult one =
        TrainWith(Sharded(), Mixed(2, c.p, c.r), train_, test_);
    const RunResult two = TrainSharded(2, Mixed(1, c.p, c.r), train_, test_);
    ExpectSameBits(one, two);
    EXPECT_EQ(two.skipped_steps, one.skipped_steps);
    EXPECT_EQ(two.adam_steps, one.adam_steps);
    // fp16 at 2^20 overflows: the ranks skipped those steps together.
    if (c.p == Precision::kFp16) {
      EXPECT_GT(two.skipped_steps, 0);
    }
  }
}

class ShardedRefusalTest : public ::testing::Test {
 protected:
  absl::Status Create(const ModelConfig& config, Collectives* c,
                      uint64_t device_bytes = kMiB) {
    auto store = Store::Open(::strata::testing::SmallStoreOptions(
        dir_.path(), device_bytes, kMiB, 16 * kMiB));
    if (!store.ok()) return store.status();
    store_ = std::move(*store);
    auto model = Mlp::Create(store_.get(), compute_.get(), config, c);
    if (model.ok()) model_ = std::move(*model);
    return model.status();
  }
  ::strata::testing::TempDir dir_;
  std::unique_ptr<Compute> compute_ = MakeCpuCompute(1);
  std::unique_ptr<Store> store_;
  std::unique_ptr<Mlp> model_;
};

TEST_F(ShardedRefusalTest, TooManyRanksAreRefused) {
  auto c = MakeThreadCollectives(5, 1.0);
  const ModelConfig config = ::strata::testing::SmallJob().model;  // 4 classes
  const absl::Status s = Create(config, c[0].get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("at most 4 ranks"));
}

// A transport that does not fit the compute: NCCL's gathers move GPU
// memory, and this compute is the CPU's.
class NamedCollectives : public CountingCollectives {
 public:
  NamedCollectives(Collectives* inner, std::string name)
      : CountingCollectives(inner), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 private:
  const std::string name_;
};

TEST_F(ShardedRefusalTest, ATransportThatDoesNotFitTheComputeIsRefused) {
  auto c = MakeThreadCollectives(1, 1.0);
  NamedCollectives nccl(c[0].get(), "nccl");
  const absl::Status s = Create(::strata::testing::SmallJob().model, &nccl);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("NCCL moves GPU memory only"));
}

TEST_F(ShardedRefusalTest, ADeviceBudgetAGranuleShortIsRefusedNamingTheSlots) {
  auto c = MakeThreadCollectives(2, 1.0);
  const ModelConfig config = ::strata::testing::SmallJob().model;
  const absl::StatusOr<ModelFootprint> f = ComputeFootprint(config, 2);
  ASSERT_TRUE(f.ok());
  const absl::Status s = Create(config, c[0].get(), DeviceNeed(*f) - 256);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("the gather slots"));
  EXPECT_THAT(s.message(), HasSubstr("--device-budget"));
}

TEST_F(ShardedRefusalTest, ARankThatNeverArrivesTimesOutNamingTheGather) {
  auto c = MakeThreadCollectives(2, 0.3);
  ModelConfig config = ::strata::testing::SmallJob().model;
  ASSERT_TRUE(Create(config, c[0].get()).ok());
  const Dataset data = SyntheticData(32, 1);
  // A step of the wrong size is refused before anything is exchanged, and
  // the run may go on.
  EXPECT_EQ(model_->TrainStep(data.images.data(), data.labels.data(), 16)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  const absl::StatusOr<LossResult> step =
      model_->TrainStep(data.images.data(), data.labels.data(), 32);
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(step.status().message(),
              HasSubstr("rank 0 waited 0.3 s for the all-gather of "
                        "layer0.weight from every other rank"));
  EXPECT_THAT(step.status().message(), HasSubstr("--collective-timeout"));
  // The ranks' shards may now be out of step: every later step is refused.
  const absl::Status again =
      model_->TrainStep(data.images.data(), data.labels.data(), 32).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("end the run"));
  EXPECT_THAT(again.message(), HasSubstr("all-gather of layer0.weight"));
}

}  // namespace
}  // namespace strata::train
