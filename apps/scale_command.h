// scale_command.h: `strata scale` — the sharded data-parallel model on paper
// (train/run/scale_model.h): per-rank memory, bytes communicated and step time
// for N ranks at large transformer shapes, next to ZeRO-Infinity's figures.
#ifndef STRATA_APPS_SCALE_COMMAND_H_
#define STRATA_APPS_SCALE_COMMAND_H_

#include <string>

namespace strata {

// Prints the estimates the flags ask for; writes them as JSON to
// `json_path` if non-empty. Returns the process exit code.
int RunScale(const std::string& json_path);

}  // namespace strata

#endif  // STRATA_APPS_SCALE_COMMAND_H_
