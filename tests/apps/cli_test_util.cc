// cli_test_util.cc: the helpers of cli_test_util.h.
#include "tests/apps/cli_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/util/test_util.h"

namespace strata {

// The bytes of the file at `path`; "" when it cannot be read.

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` (a shell prefix: variables, a program) with `args`, each
// single-quoted, and captures what it prints.
Result RunShell(const std::string& command,
                const std::vector<std::string>& args) {
  ::strata::testing::TempDir dir;
  std::string cmd = command;
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " >" + dir.path() + "/out 2>" + dir.path() + "/err </dev/null";
  const int status = std::system(cmd.c_str());
  Result r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(dir.path() + "/out");
  r.err = ReadFile(dir.path() + "/err");
  return r;
}

// `strata ARGS`; `env` ("PATH=/x") prefixes the command.
Result Strata(const std::vector<std::string>& args, const std::string& env) {
  return RunShell(env + " " + STRATA_CLI, args);
}

// A tiny MLP run: three steps through the store with NVMe in `dir`.
std::vector<std::string> TinyTrain(const std::string& dir) {
  return {"train",
          "--model=mlp",
          "--width=32",
          "--depth=2",
          "--batch=64",
          "--max-steps=3",
          "--device-budget=1MiB",
          "--host-budget=2MiB",
          "--nvme-budget=16MiB",
          "--block-size=64KiB",
          "--nvme-dir=" + dir};
}

// True when Debian's dataset-fashion-mnist is installed.

bool HasFashionMnist() {
  return std::filesystem::exists(
      "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

// The JSON file at `path` (throws on bad JSON: a test failure).

nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(ReadFile(path));
}

// True when gnuplot is on the PATH.

bool HasGnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

// True when mpirun is on the PATH.
bool HasMpirun() { return std::system("command -v mpirun >/dev/null") == 0; }

// `mpirun --oversubscribe` as root may run it, with the sanitizers told
// that what Open MPI's own code does is not strata's (the .supp files say
// what and why; each build reads its own variable).
std::string Mpirun() {
  return std::string(geteuid() == 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1 "
                                      "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                                    : "") +
         "LSAN_OPTIONS=suppressions=" STRATA_LSAN_OPEN_MPI
         ":fast_unwind_on_malloc=0 "
         "TSAN_OPTIONS=\"$TSAN_OPTIONS suppressions=" STRATA_TSAN_OPEN_MPI
         "\" mpirun --oversubscribe";
}

// gpt_cli_check's micro GPT on a small corpus written into `dir`, for
// `steps` steps.
std::vector<std::string> GptMicroTrain(const std::string& dir, int steps) {
  {
    std::ofstream corpus(dir + "/corpus.txt");
    for (int i = 1; i <= 300; ++i) {
      corpus << "and the word " << i << " was with the model\n";
    }
  }
  std::filesystem::create_directories(dir + "/nvme");
  return {"train",
          "--model=gpt",
          "--tokenizer=byte",
          "--corpus=" + dir + "/corpus.txt",
          "--cache-dir=" + dir + "/cache",
          "--nvme-dir=" + dir + "/nvme",
          "--layers=1",
          "--embed=32",
          "--heads=2",
          "--context=16",
          "--batch=2",
          "--eval-tokens=256",
          "--device-budget=8MiB",
          "--host-budget=16MiB",
          "--nvme-budget=64MiB",
          "--max-steps=" + std::to_string(steps),
          "--grad-clip=0"};
}

}  // namespace strata
