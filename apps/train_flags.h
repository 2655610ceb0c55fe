// train_flags.h: the flags `strata train` shares between its models (defined
// in train_command.cc).
#ifndef STRATA_APPS_TRAIN_FLAGS_H_
#define STRATA_APPS_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int64_t, batch);
ABSL_DECLARE_FLAG(int32_t, accumulate);
ABSL_DECLARE_FLAG(int64_t, max_steps);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(std::string, lr_schedule);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(std::string, optimizer_tier);
ABSL_DECLARE_FLAG(bool, resident);
ABSL_DECLARE_FLAG(std::string, checkpoint);
// Checkpoints (defined in checkpoint_command.cc).
ABSL_DECLARE_FLAG(std::string, save_dir);
ABSL_DECLARE_FLAG(int64_t, save_every);
ABSL_DECLARE_FLAG(int32_t, keep);
ABSL_DECLARE_FLAG(std::string, resume);
// Inputs an output must not overwrite (strata_main.cc, store_flags.cc).
ABSL_DECLARE_FLAG(std::string, config);
ABSL_DECLARE_FLAG(std::string, machine_profile);

#endif  // STRATA_APPS_TRAIN_FLAGS_H_
