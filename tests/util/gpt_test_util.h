// gpt_test_util.h: the GPT at test size for the tests that train it — a
// micro config, batches of a repetitive text, and a run under resident,
// offloaded or host-huge budgets that reports its losses, two parameters
// and the counters the tests compare.
#ifndef STRATA_TESTS_UTIL_GPT_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_GPT_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "train/model/gpt.h"
#include "train/model/gpt_config.h"
#include "train/run/gpt_setup.h"

namespace strata::train::testing {

using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;

inline GptConfig Micro() {
  GptConfig c;
  c.layers = 2;
  c.heads = 2;
  c.embed = 64;
  c.context = 16;
  c.vocab = 256;  // bytes
  c.batch = 2;
  c.grad_clip = 10.0f;  // on (speculative updates), never reached here
  c.seed = 5;
  c.adam.lr = 3e-3f;
  c.classifier_rows = 12;  // 32 rows in slices of 12, 12, 8
  return c;
}

// Batches of byte windows of a repetitive text at SplitMix64 offsets: a
// small model learns it within a few dozen steps.
class Batches {
 public:
  explicit Batches(const GptConfig& c) : c_(c) {
    for (int i = 0; i < 40; ++i) {
      text_ += "in the beginning the word was with the model and the model ";
    }
  }
  // One step's sequences (batch x accumulate).
  void Next(std::vector<int32_t>* in, std::vector<int32_t>* out) {
    in->resize(c_.step_sequences() * c_.context);
    out->resize(c_.step_sequences() * c_.context);
    for (int64_t b = 0; b < c_.step_sequences(); ++b) {
      const uint64_t span = text_.size() - c_.context - 1;
      const int64_t at = static_cast<int64_t>(SplitMix64Next(state_) % span);
      for (int64_t t = 0; t < c_.context; ++t) {
        (*in)[b * c_.context + t] = static_cast<uint8_t>(text_[at + t]);
        (*out)[b * c_.context + t] = static_cast<uint8_t>(text_[at + t + 1]);
      }
    }
  }

 private:
  GptConfig c_;
  std::string text_;
  uint64_t state_ = 11;
};

enum class Where { kResident, kOffloaded, kHostHuge };

struct TrainRun {
  std::vector<double> losses;
  std::vector<float> wte, qkv;  // two parameters after training
  ClipStats clip;
  Stats stats;
  uint64_t state_bytes = 0;
  double recompute_seconds = 0;
  uint64_t peak_activation_bytes = 0;
  std::array<uint64_t, kNumLinks> train_link_bytes{};
  int64_t adam_steps = 0;
  int64_t skipped_steps = 0;
  std::vector<LossScaleChange> loss_scale_history;  // fp16 only
};

// Store options for `where`: offloaded budgets are the footprint's working
// sets plus a little, so nearly everything streams from NVMe.
inline StoreOptions OptionsFor(Where where, const std::string& dir,
                               GptConfig& c, int sharded_ranks = 0) {
  absl::StatusOr<ModelFootprint> f = ComputeGptFootprint(c, sharded_ranks);
  EXPECT_TRUE(f.ok()) << f.status();
  const uint64_t device =
      f->device_working_set_bytes + f->largest_device_tensor_bytes + 64 * 1024;
  const uint64_t host = where == Where::kHostHuge
                            ? 64 * kMiB
                            : f->optimizer_working_set_bytes +
                                  2 * f->largest_tensor_bytes + 256 * 1024;
  StoreOptions so = SmallStoreOptions(dir, device, host, 64 * kMiB);
  if (where == Where::kResident) {
    EXPECT_TRUE(MakeGptResident(c, so).ok());
  }
  return so;
}

// `collectives`: one rank of a sharded run, which trains on batches of
// `ranks` x the config's step sequences (every rank the same global batch).
// `cuda`: on the CUDA device (and compute) rather than the simulated one.
inline TrainRun Train(Where where, GptConfig c, int steps,
                      Collectives* collectives = nullptr, bool cuda = false) {
  TempDir dir;
  const int ranks = collectives ? collectives->size() : 1;
  StoreOptions so = OptionsFor(where, dir.path(), c, collectives ? ranks : 0);
  if (cuda) so.device.backend = DeviceBackendKind::kCuda;
  absl::StatusOr<std::unique_ptr<GptSetup>> setup =
      OpenGptSetup(so, c, collectives);
  EXPECT_TRUE(setup.ok()) << setup.status();
  if (!setup.ok()) return {};
  Gpt& gpt = *(*setup)->model;
  GptConfig global = c;
  global.accumulate *= ranks;
  Batches batches(global);
  std::vector<int32_t> in, out;
  TrainRun run;
  for (int s = 0; s < steps; ++s) {
    batches.Next(&in, &out);
    absl::StatusOr<double> loss =
        gpt.TrainStep(in.data(), out.data(), global.step_sequences());
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return {};
    run.losses.push_back(*loss / in.size());
  }
  EXPECT_TRUE(gpt.ReadParameter("wte", &run.wte).ok());
  EXPECT_TRUE(gpt.ReadParameter("block1.qkv.weight", &run.qkv).ok());
  run.clip = gpt.clip_stats();
  run.stats = (*setup)->store->GetStats();
  run.state_bytes = gpt.footprint().state_bytes();
  run.recompute_seconds = gpt.recompute_seconds();
  run.peak_activation_bytes = gpt.peak_activation_bytes();
  run.train_link_bytes = gpt.train_link_bytes();
  run.adam_steps = gpt.steps();
  run.skipped_steps = gpt.skipped_steps();
  if (const DynamicLossScale* ls = gpt.loss_scale()) {
    run.loss_scale_history = ls->history();
  }
  return run;
}

}  // namespace strata::train::testing

#endif  // STRATA_TESTS_UTIL_GPT_TEST_UTIL_H_
