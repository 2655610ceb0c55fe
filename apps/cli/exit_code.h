// exit_code.h: the command line's exit codes (README, `strata --help`):
// 0 success, 1 a failure while running, 2 bad input.
#ifndef STRATA_APPS_CLI_EXIT_CODE_H_
#define STRATA_APPS_CLI_EXIT_CODE_H_

#include <string>

#include "absl/status/status.h"

namespace strata {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// The exit code for an error met before any work began (opening the store,
// checking the budgets, finding a checkpoint or a directory): what the user
// gave must change — a flag value, a path, a budget — so it is bad input,
// unless the error is the machine's (I/O, corrupt data, a bug).
inline int ExitCodeBeforeRun(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

// The line printed for `status`: bad input (the codes above) reads as its
// message alone, which says what to change; a failure of the machine or of
// strata keeps its code's name (DATA_LOSS, UNAVAILABLE, INTERNAL...), which
// says what broke. The JSON report keeps the code either way.
inline std::string ErrorText(const absl::Status& status) {
  return ExitCodeBeforeRun(status) == kExitBadInput
             ? std::string(status.message())
             : status.ToString();
}

}  // namespace strata

#endif  // STRATA_APPS_CLI_EXIT_CODE_H_
