// train_command.h: `strata train`, the main job — a deep MLP on Fashion-MNIST
// whose every tensor lives in the store, with a report of what moved.
#ifndef STRATA_APPS_TRAIN_COMMAND_H_
#define STRATA_APPS_TRAIN_COMMAND_H_

#include <string>

namespace strata {

// Sets the store flags' defaults to the training job's (budgets small enough
// that the model state spills to host and NVMe). Call before parsing the
// command line, so explicit flags still win.
void ApplyTrainDefaults();

// Runs `strata train` from the parsed flags, writing the JSON report, the
// timeline and the plot (PNG) where the paths are non-empty; returns the
// exit code (0 ok, 1 failed, 2 bad flags).
int RunTrain(const std::string& json_path, const std::string& timeline_path,
             const std::string& plot_path);

}  // namespace strata

#endif  // STRATA_APPS_TRAIN_COMMAND_H_
