// train_test_util.h: the MLP training job at test size — a learnable
// synthetic dataset, a small model, budgets that force every tier to be used
// or keep everything resident, and one call that trains and reports.
#ifndef STRATA_TESTS_UTIL_TRAIN_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_TRAIN_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "strata/options.h"
#include "strata/stats.h"
#include "train/comm/collectives.h"
#include "train/data/dataset.h"
#include "train/model/loss_scale.h"
#include "train/run/trainer.h"

namespace strata::testing {

inline constexpr int kSyntheticFeatures = 32;
inline constexpr int kSyntheticClasses = 4;

// A learnable synthetic set: Gaussian-ish inputs labelled by a fixed random
// linear teacher, so a small MLP can fit it and its loss must fall.
train::Dataset SyntheticData(int64_t count, uint64_t seed);

// 32 -> 64 x 3 -> 4, batch 16, two epochs.
train::TrainOptions SmallJob();

struct Budgets {
  uint64_t device = 0, host = 0, nvme = 0;
  Tier home = Tier::kNvme;
  Tier optimizer = Tier::kHost;
  bool prefetch = true;
  EvictionPolicy eviction = EvictionPolicy::kBelady;
  DeviceMemory memory = DeviceMemory::kExplicitCopies;
  bool unified_hints = true;
};

// Resident: everything homed on a device big enough for all of it.
Budgets Resident();
// Offloaded: the device holds one layer's working set, the host one
// optimizer update, the rest is on NVMe.
Budgets Offloaded();

struct RunResult {
  train::TrainResult result;
  Stats stats;
  std::vector<std::vector<float>> weights;  // every layer's, after training
  uint64_t peak_activation_bytes = 0;       // Mlp's, after training
  double recompute_seconds = 0;
  std::array<uint64_t, kNumLinks> train_link_bytes{};
  int64_t adam_steps = 0;     // updates applied
  int64_t skipped_steps = 0;  // mixed precision's skipped steps
  std::vector<train::LossScaleChange> loss_scale_history;  // fp16 only
  bool optimizer_streamed = false;  // Mlp::streams_optimizer()
};

// Trains `job` with `b` on a fresh store and CPU compute (one rank of a
// sharded run with `collectives`); failures are reported as test failures
// and give an empty result.
RunResult TrainWith(const Budgets& b, train::TrainOptions job,
                    const train::Dataset& train, const train::Dataset& test,
                    train::Collectives* collectives = nullptr);

inline uint64_t LinkBytes(const Stats& s, Link l) {
  return s.links[int(l)].bytes;
}

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_TRAIN_TEST_UTIL_H_
