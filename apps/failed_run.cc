// failed_run.cc: the resume hint and report of a failed run (see
// failed_run.h).
#include "apps/failed_run.h"

#include <cstdio>

#include "apps/cli/exit_code.h"
#include "apps/train_report.h"

namespace strata {

void ReportFailedRun(const absl::Status& error, const std::string& json_path,
                     const Stats& st, absl::Span<const double> losses,
                     const RunCheckpoints& checkpoints,
                     const nlohmann::json& extra) {
  if (const std::string hint = checkpoints.ResumeHint(); !hint.empty()) {
    std::fprintf(stderr, "strata train: %s\n", hint.c_str());
  }
  if (json_path.empty()) return;
  nlohmann::json report = FailedRunJson(error, st, losses);
  report.update(checkpoints.ReportJson());
  report.update(extra);
  if (absl::Status w = WriteReportJson(json_path, report); !w.ok()) {
    std::fprintf(stderr, "strata train: %s\n", ErrorText(w).c_str());
  }
}

}  // namespace strata
