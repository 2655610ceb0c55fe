// cli_test_util.h: running the `strata` binary as a user does, for the
// command-line tests (tests/apps/cli_*_test.cc), and the small runs they share.
#ifndef STRATA_TESTS_APPS_CLI_TEST_UTIL_H_
#define STRATA_TESTS_APPS_CLI_TEST_UTIL_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace strata {

// What a command printed and its exit status.
struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

// The bytes of the file at `path`; "" when it cannot be read.
std::string ReadFile(const std::string& path);

// Runs `command` (a shell prefix: variables, a program) with `args`, each
// single-quoted, and captures what it prints.
Result RunShell(const std::string& command,
                const std::vector<std::string>& args);

// `strata ARGS`; `env` ("PATH=/x") prefixes the command.
Result Strata(const std::vector<std::string>& args,
              const std::string& env = "");

// A tiny MLP run: three steps through the store with NVMe in `dir`.
std::vector<std::string> TinyTrain(const std::string& dir);

// True when Debian's dataset-fashion-mnist is installed.
bool HasFashionMnist();

// The JSON file at `path` (throws on bad JSON: a test failure).
nlohmann::json ReadJson(const std::string& path);

// True when gnuplot is on the PATH.
bool HasGnuplot();

// True when mpirun is on the PATH.
bool HasMpirun();

// `mpirun --oversubscribe` as root may run it, with the sanitizers told
// that what Open MPI's own code does is not strata's (the .supp files say
// what and why; each build reads its own variable).
std::string Mpirun();

// gpt_cli_check's micro GPT on a small corpus written into `dir`, for
// `steps` steps.
std::vector<std::string> GptMicroTrain(const std::string& dir, int steps);

}  // namespace strata

#endif  // STRATA_TESTS_APPS_CLI_TEST_UTIL_H_
