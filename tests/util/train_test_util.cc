// train_test_util.cc: the MLP training job at test size (see
// train_test_util.h).
#include "tests/util/train_test_util.h"

#include <memory>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/model/model.h"

namespace strata::testing {

train::Dataset SyntheticData(int64_t count, uint64_t seed) {
  train::Dataset d;
  d.count = count;
  d.rows = 4;
  d.cols = kSyntheticFeatures / 4;
  d.classes = kSyntheticClasses;
  uint64_t s = 99;    // the teacher is the same for every split
  auto next = [&s] {  // xorshift64*, uniform in [-1, 1)
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return ((s * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-52 - 1.0;
  };
  std::vector<double> teacher(kSyntheticFeatures * kSyntheticClasses);
  for (double& t : teacher) t = next();
  s = seed;
  for (int64_t i = 0; i < count; ++i) {
    double best = -1e30;
    int label = 0;
    std::vector<float> x(kSyntheticFeatures);
    for (float& v : x) v = static_cast<float>(next() + next());
    for (int c = 0; c < kSyntheticClasses; ++c) {
      double score = 0;
      for (int f = 0; f < kSyntheticFeatures; ++f)
        score += teacher[c * kSyntheticFeatures + f] * x[f];
      if (score > best) best = score, label = c;
    }
    d.images.insert(d.images.end(), x.begin(), x.end());
    d.labels.push_back(label);
  }
  return d;
}

train::TrainOptions SmallJob() {
  train::TrainOptions o;
  o.model.inputs = kSyntheticFeatures;
  o.model.classes = kSyntheticClasses;
  o.model.width = 64;
  o.model.depth = 3;
  o.model.batch = 16;
  o.model.seed = 7;
  o.epochs = 2;
  o.shuffle_seed = 7;
  return o;
}

Budgets Resident() {
  return {.device = 8 * kMiB,
          .host = 2 * kMiB,
          .nvme = 0,
          .home = Tier::kDevice,
          .optimizer = Tier::kDevice};
}
Budgets Offloaded() {
  return {.device = 80 * 1024, .host = 96 * 1024, .nvme = 8 * kMiB};
}

RunResult TrainWith(const Budgets& b, train::TrainOptions job,
                    const train::Dataset& train, const train::Dataset& test,
                    train::Collectives* collectives) {
  TempDir dir;
  StoreOptions so = SmallStoreOptions(dir.path(), b.device, b.host, b.nvme);
  if (b.nvme == 0) {
    so.nvme.directories.clear();
    so.nvme.budget_bytes = 0;
  }
  so.scheduler.prefetch = b.prefetch;
  so.scheduler.eviction = b.eviction;
  so.device.memory = b.memory;
  so.device.unified_hints = b.unified_hints;
  job.model.home = b.home;
  job.model.optimizer_tier = b.optimizer;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  std::unique_ptr<train::Compute> compute = train::MakeCpuCompute(1);
  absl::StatusOr<std::unique_ptr<train::Mlp>> model =
      train::Mlp::Create(store->get(), compute.get(), job.model, collectives);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  absl::StatusOr<train::TrainResult> result =
      train::Train(**model, train, test, job);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  RunResult run{.result = *result,
                .stats = (*store)->GetStats(),
                .peak_activation_bytes = (*model)->peak_activation_bytes(),
                .recompute_seconds = (*model)->recompute_seconds(),
                .train_link_bytes = (*model)->train_link_bytes(),
                .adam_steps = (*model)->steps(),
                .skipped_steps = (*model)->skipped_steps(),
                .optimizer_streamed = (*model)->streams_optimizer()};
  if (const train::DynamicLossScale* ls = (*model)->loss_scale()) {
    run.loss_scale_history = ls->history();
  }
  for (int l = 0; l < (*model)->layers(); ++l) {
    run.weights.emplace_back();
    EXPECT_TRUE((*model)->ReadWeights(l, &run.weights.back()).ok());
  }
  return run;
}

}  // namespace strata::testing
