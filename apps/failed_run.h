// failed_run.h: what `strata train` (MLP and GPT) leaves behind when a run
// fails after it began — a persistent I/O error, a save that could not be
// written: where to resume from, and the --json report with the error, so
// the steps done, the checkpoints written and the store's counters are not
// lost with the run.
#ifndef STRATA_APPS_FAILED_RUN_H_
#define STRATA_APPS_FAILED_RUN_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "apps/checkpoint_command.h"
#include "strata/stats.h"

namespace strata {

// After the error itself was printed: prints the resume hint (if --save-dir
// holds a checkpoint) and writes FailedRunJson plus the checkpoint keys and
// `extra` (e.g. the config) to `json_path` unless it is empty; a report that
// cannot be written is said on stderr, the run's own error still stands.
void ReportFailedRun(const absl::Status& error, const std::string& json_path,
                     const Stats& st, absl::Span<const double> losses,
                     const RunCheckpoints& checkpoints,
                     const nlohmann::json& extra);

}  // namespace strata

#endif  // STRATA_APPS_FAILED_RUN_H_
