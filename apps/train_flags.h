// train_flags.h: the flags `strata train` shares between its models (defined
// in train_command.cc).
#ifndef STRATA_APPS_TRAIN_FLAGS_H_
#define STRATA_APPS_TRAIN_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "apps/cli/output_path.h"

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

namespace strata {

// A training run's output files, checked before the run (defined in
// train_command.cc): --json and --timeline writable, no two outputs (and
// --plot) one file nor one of `inputs`, --config or --machine-profile, and
// --plot a PNG gnuplot can write. The first refusal, naming its flag.
absl::Status CheckTrainOutputs(const std::string& json_path,
                               const std::string& timeline_path,
                               const std::string& plot_path,
                               std::vector<FileFlag> inputs = {});

}  // namespace strata

#endif  // STRATA_APPS_TRAIN_FLAGS_H_
