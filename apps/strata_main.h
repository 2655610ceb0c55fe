// strata_main.h: the command line. `strata <command> [flags]`: the
// command's flags are checked against its table (apps/cli/command_table.h),
// a --config file's flags set first and the command line's after them, then
// the command runs. Exit codes: 0 success, 1 a failure while running, 2 bad
// input.
#ifndef STRATA_APPS_STRATA_MAIN_H_
#define STRATA_APPS_STRATA_MAIN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace strata {

// What a command line comes to before any command runs.
struct Invocation {
  // -1: run `command` (its flags are set); else exit with this code after
  // printing `out` to stdout and `err` to stderr (help, --version, a
  // refusal).
  int exit_code = -1;
  std::string out, err;
  std::string command;   // the command to run
  std::string argument;  // export's checkpoint ("" when not given)
  // A refusal of the command line itself, and whether it holds
  // --distributed: under mpirun rank 0 alone prints it
  // (DistributedRun::AwaitRankZeroRefusal).
  absl::Status line_refusal;
  bool distributed_given = false;
};

// Reads `args` (argv without the program name): splits it, checks each flag
// against the command's table, reads --config, and sets the flags. Prints
// nothing and runs nothing, so a test or a fuzzer can call it on any words
// (under absl::FlagSaver to undo the flags it sets).
Invocation PrepareInvocation(const std::vector<std::string>& args);

// `strata ARGS`: PrepareInvocation, then the command or the printing.
int Main(int argc, char** argv);

}  // namespace strata

#endif  // STRATA_APPS_STRATA_MAIN_H_
