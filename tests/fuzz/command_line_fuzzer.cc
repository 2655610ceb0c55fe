// command_line_fuzzer.cc: `strata ARGS` up to the moment a command would
// run (PrepareInvocation: split, checked against the command's table,
// --config read, flags set; then undone). The input is argv, its words
// split at NUL bytes. Whatever the words, the answer is a command to run or
// an exit code with its text: 0 with help or version on stdout, 2 with a
// refusal on stderr. (A --config=PATH among the words is read, only read,
// wherever it points; config_file_fuzzer.cc fuzzes the file itself.)
#include <algorithm>
#include <string>
#include <vector>

#include "apps/strata_main.h"
#include "tests/fuzz/fuzz_target.h"

STRATA_FUZZ_TARGET(command_line) {
  using namespace strata;
  std::vector<std::string> args;
  for (size_t at = 0; at <= data.size();) {
    const size_t end = std::min(data.find('\0', at), data.size());
    args.emplace_back(data.substr(at, end - at));
    at = end + 1;
  }
  if (data.empty()) args.clear();
  fuzz::FlagRestorer restorer;
  const Invocation invocation = PrepareInvocation(args);
  if (invocation.exit_code < 0) {
    STRATA_FUZZ_CHECK(!invocation.command.empty());
    return true;
  }
  STRATA_FUZZ_CHECK(invocation.exit_code == 0 || invocation.exit_code == 2);
  if (invocation.exit_code == 2) STRATA_FUZZ_CHECK(!invocation.err.empty());
  if (invocation.exit_code == 0) STRATA_FUZZ_CHECK(!invocation.out.empty());
  STRATA_FUZZ_CHECK_REFUSAL(invocation.line_refusal);
  return invocation.exit_code == 0;
}
