// train_defaults.h: the defaults `strata train` uses instead of the shared
// flags' own, and those --model=gpt uses instead of the MLP's. The flags are
// set to these when the command line leaves them unset (SetBudgetDefaults,
// SetUnsetBudgets); help shows them as the command's defaults.
#ifndef STRATA_APPS_TRAIN_DEFAULTS_H_
#define STRATA_APPS_TRAIN_DEFAULTS_H_

#include <cstdint>

#include "strata/options.h"

namespace strata {

// The MLP: its model state (80 MiB at width 1024, depth 5) is ~5x the device
// budget and ~2.5x the host budget, so every tier works.
inline constexpr uint64_t kTrainDeviceBudget = 16 * kMiB;
inline constexpr uint64_t kTrainHostBudget = 32 * kMiB;
inline constexpr uint64_t kTrainNvmeBudget = 512 * kMiB;

// The GPT: its state (32.5 MiB at the defaults) is 4.3x the device budget
// and 1.4x the host budget, so NVMe is used every step; 700 steps take ~3.5
// minutes on 2 cores (README, Measured).
inline constexpr int64_t kGptBatch = 2;
inline constexpr int64_t kGptSteps = 700;
inline constexpr double kGptLr = 3e-3;
inline constexpr uint64_t kGptDeviceBudget = 7 * kMiB + kMiB / 2;
inline constexpr uint64_t kGptHostBudget = 24 * kMiB;
inline constexpr uint64_t kGptNvmeBudget = 512 * kMiB;

}  // namespace strata

#endif  // STRATA_APPS_TRAIN_DEFAULTS_H_
