// config_file.h: --config=FILE.json, a run's flags as a JSON object (as
// DeepSpeed takes a JSON config per run), and the effective configuration
// every report carries under "config", so that `strata train
// --config=REPORT.json` repeats the run.
#ifndef STRATA_APPS_CLI_CONFIG_FILE_H_
#define STRATA_APPS_CLI_CONFIG_FILE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/cli/command_line.h"
#include "apps/cli/command_table.h"

namespace strata {

// The flags `path` sets for `command`: the file's object, or its "config"
// object when it has one (a report: the other keys are results). Keys are
// spelled as the flags are, with dashes or underscores. InvalidArgument
// naming the file and the key for an unreadable file or a value of the
// wrong JSON type (a string for an integer flag, ...), an unknown key (with
// the nearest flag), a flag the command does not take, or "config" itself,
// or the report of a run of another number of ranks than `launch_ranks` (the
// ranks of this launch: mpirun's -np, 1 without MPI); NotFound when the file
// does not exist.
absl::StatusOr<std::vector<FlagArg>> LoadConfigFile(const std::string& path,
                                                    const CommandSpec& command,
                                                    int launch_ranks);

// The flags `command` ran with, as an object --config reads back: every
// flag of the command except the output files (--json, --plot, ...) and
// checkpoint places (--save-dir, --resume), and for `train` only the flags
// of the model it ran (--model). Sizes are
// written as "16MiB" where that is exact, else in bytes.
nlohmann::json EffectiveConfig(const CommandSpec& command);

}  // namespace strata

#endif  // STRATA_APPS_CLI_CONFIG_FILE_H_
