// mlp_train_command.h: `strata train --model=mlp` — a deep MLP on
// Fashion-MNIST whose every tensor lives in the store, with a report of what
// moved.
#ifndef STRATA_APPS_MLP_TRAIN_COMMAND_H_
#define STRATA_APPS_MLP_TRAIN_COMMAND_H_

#include <string>

namespace strata {

// Runs the MLP from the parsed flags, writing the JSON report, the timeline
// and the plot where the paths are non-empty; returns the exit code (0 ok,
// 1 failed, 2 bad flags).
int RunMlpTrain(const std::string& json_path, const std::string& timeline_path,
                const std::string& plot_path);

}  // namespace strata

#endif  // STRATA_APPS_MLP_TRAIN_COMMAND_H_
