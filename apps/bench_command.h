// bench_command.h: `strata bench` — named benchmark cases, each saying
// whether it applies here, run by name or prefix, printed as a table and
// optionally written as JSON.
#ifndef STRATA_APPS_BENCH_COMMAND_H_
#define STRATA_APPS_BENCH_COMMAND_H_

#include <string>

#include "strata/options.h"

namespace strata {

// Runs the cases whose name starts with `selector` (all when empty), or lists
// them when `list`. Returns the process exit code (2 for an unknown case).
// `timeline_path`, if set, receives the Chrome trace of the scheduler case.
// The nvme case uses the first NVMe directory, the block size and the queue
// depth of `store` (from the shared flags).
int RunBench(const std::string& selector, bool list,
             const std::string& json_path, const std::string& timeline_path,
             const StoreOptions& store);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_COMMAND_H_
