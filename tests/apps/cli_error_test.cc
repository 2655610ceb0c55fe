// cli_error_test.cc: bad command lines: a mistyped flag or command gets
// the nearest name and exit code 2; bad values, empty paths, outputs that
// collide and flags of other commands are refused before any work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/apps/cli_test_util.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

TEST(CliErrorTest, MistypedFlagGetsTheNearestNameAndExitCode2) {
  const Result r = Strata({"train", "--device-budgte=1GiB"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown flag --device-budgte; did you mean "
                       "--device-budget?"),
            std::string::npos)
      << r.err;
  const Result b = Strata({"bench", "--bench_sise", "1MiB"});
  EXPECT_EQ(b.rc, 2);
  EXPECT_NE(b.err.find("did you mean --bench-size?"), std::string::npos)
      << b.err;
  const Result far = Strata({"info", "--zzzzzzzz"});
  EXPECT_EQ(far.rc, 2);
  EXPECT_NE(far.err.find("`strata info --help` lists its flags"),
            std::string::npos)
      << far.err;
}

TEST(CliErrorTest, MistypedCommandAndOtherCommandsFlags) {
  const Result r = Strata({"trian", "--width=8"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown command 'trian'; did you mean 'train'?"),
            std::string::npos)
      << r.err;
  const Result h = Strata({"help", "bnech"});
  EXPECT_EQ(h.rc, 2);
  EXPECT_NE(h.err.find("did you mean 'bench'?"), std::string::npos) << h.err;
  const Result other = Strata({"info", "--width=8"});
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("--width is not a flag of `strata info` (it "
                           "belongs to `strata train`)"),
            std::string::npos)
      << other.err;
}

TEST(CliErrorTest, BadValuesExit2) {
  const Result r = Strata({"train", "--width=abc"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--width=abc"), std::string::npos) << r.err;
  // It says what the flag takes.
  EXPECT_NE(r.err.find("give a whole number, e.g. --width="), std::string::npos)
      << r.err;
  const Result lr = Strata({"train", "--lr=fast"});
  EXPECT_EQ(lr.rc, 2);
  EXPECT_NE(lr.err.find("give a number, e.g. --lr="), std::string::npos)
      << lr.err;
  // A flag with no value at the end of the line: the refusal still names
  // the command.
  const Result bare = Strata({"train", "--max-steps"});
  EXPECT_EQ(bare.rc, 2);
  EXPECT_EQ(bare.err.rfind("strata train: --max-steps needs a value", 0), 0u)
      << bare.err;
  EXPECT_EQ(Strata({"train", "--noprefetch=1"}).rc, 2);
  EXPECT_EQ(Strata({"info", "extra"}).rc, 2);
  // A size that does not parse says why once, without absl's own wording.
  const Result size = Strata({"train", "--device-budget=lots"});
  EXPECT_EQ(size.rc, 2);
  EXPECT_EQ(size.err.rfind("strata train: --device-budget=lots: 'lots' is not "
                           "a byte size",
                           0),
            0u)
      << size.err;
  EXPECT_EQ(size.err.find("Illegal value"), std::string::npos) << size.err;
  // Choice and count flags name the flag and the value given.
  for (const auto& [flag, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"--precision=fp8", "--precision=fp8: 'fp8' is not a precision"},
           {"--sample=-1", "--sample=-1: give a count >= 0"},
           {"--max-steps=99999999999999999999",
            "--max-steps=99999999999999999999: out of range (at most "
            "9223372036854775807)"},
           {"--keep=-99999999999",
            "--keep=-99999999999: out of range (at least -2147483648)"},
           {"--device-budget=16EiB",
            "--device-budget=16EiB: '16EiB' is too large a byte size"},
           {"--keep=2", "--keep needs --save-dir=DIR"}}) {
    const Result r = Strata({"train", flag});
    EXPECT_EQ(r.rc, 2) << flag;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  // --help and --version take no value (not "unknown flag --help").
  for (const char* word : {"--help=1", "--version=yes"}) {
    const Result r = Strata({"train", word});
    EXPECT_EQ(r.rc, 2) << word;
    EXPECT_NE(r.err.find("takes no value"), std::string::npos) << r.err;
  }
  // A budget the round trip cannot use is refused before the store opens.
  const Result small = Strata({"info", "--device-budget=4MiB"});
  EXPECT_EQ(small.rc, 2) << small.err;
  EXPECT_NE(small.err.find("at least 5 MiB"), std::string::npos) << small.err;
  EXPECT_EQ(small.out.find("round trip"), std::string::npos) << small.out;
}

// A value-taking flag never takes the next flag as its value; the refusal
// a user can act on comes first; stray flags are not ignored.
TEST(CliErrorTest, AFlagNeverEatsTheNextFlagAsItsValue) {
  const Result help = Strata({"train", "--json", "--help"});
  EXPECT_EQ(help.rc, 0) << help.err;  // help, not a run writing "--help"
  EXPECT_NE((help.out + help.err).find("Usage: strata train"),
            std::string::npos);
  const Result save = Strata({"train", "--save-dir", "--max-steps=2"});
  EXPECT_EQ(save.rc, 2);
  EXPECT_EQ(save.err.rfind("strata train: --save-dir needs a value", 0), 0u)
      << save.err;
  // Another command's flag is refused as such, with or without its value.
  const Result other = Strata({"info", "--max-steps"});
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("is not a flag of `strata info`"), std::string::npos)
      << other.err;
  const Result no_command = Strata({"--max-steps=3"});
  EXPECT_EQ(no_command.rc, 2);
  EXPECT_NE(no_command.err.find("no command"), std::string::npos)
      << no_command.err;
  EXPECT_EQ(Strata({"completion", "bash", "--bogus"}).rc, 2);
  const Result negated = Strata({"train", "--noprefetch=1"});
  EXPECT_EQ(negated.rc, 2);
  EXPECT_NE(negated.err.find("--prefetch=true|false"), std::string::npos)
      << negated.err;
  EXPECT_EQ(negated.err.find("--prefetch=1"), std::string::npos) << negated.err;
}

// Validation scores whole windows of --context tokens: fewer tokens than
// one window is refused up front, not after the corpus is prepared.
TEST(CliErrorTest, EvalTokensBelowOneWindowIsRefusedBeforeTheCorpus) {
  const Result r =
      Strata({"train", "--model=gpt", "--context=64", "--eval-tokens=10"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--eval-tokens=10 scores less than one validation "
                       "window of --context=64 tokens: give at least 64"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("preparing the corpus"), std::string::npos) << r.err;
}

// A breaker's pass: an empty path is a mistake, not "none" (--resume="$DIR"
// with DIR unset); info checks its --json path as the others do; help words
// given a value and one-letter flags get messages about what was typed; the
// GPT refuses a bad NVMe tier before it prepares its corpus.
TEST(CliErrorTest, EmptyPathsHelpWordsAndEarlyStoreChecks) {
  for (const char* flag :
       {"--resume=", "--save-dir=", "--json=", "--config=", "--timeline="}) {
    const Result r = Strata({"train", "--max-steps=1", flag});
    EXPECT_EQ(r.rc, 2) << flag;
    EXPECT_NE(r.err.find("is given an empty value: give a path"),
              std::string::npos)
        << r.err;
  }
  const Result info = Strata({"info", "--json=/nonexistent/strata/i.json"});
  EXPECT_EQ(info.rc, 2) << info.err;
  EXPECT_NE(
      info.err.find("--json=/nonexistent/strata/i.json cannot be written"),
      std::string::npos)
      << info.err;
  EXPECT_EQ(info.out.find("round trip"), std::string::npos) << info.out;
  for (const char* word : {"--helpfull=1", "-h=1"}) {
    const Result r = Strata({"train", word});
    EXPECT_EQ(r.rc, 2) << word;
    EXPECT_NE(r.err.find("takes no value"), std::string::npos) << r.err;
  }
  const Result v = Strata({"-v"});
  EXPECT_EQ(v.rc, 2);
  EXPECT_NE(v.err.find("unknown flag -v; did you mean --version?"),
            std::string::npos)
      << v.err;
  const Result x = Strata({"train", "-x"});
  EXPECT_EQ(x.rc, 2);
  EXPECT_NE(x.err.find("unknown flag -x; `strata train --help`"),
            std::string::npos)
      << x.err;
  const Result nvme = Strata({"train", "--model=gpt", "--max-steps=1",
                              "--nvme-dir=/nonexistent/strata"});
  EXPECT_EQ(nvme.rc, 2);
  EXPECT_NE(
      nvme.err.find("NVMe directory '/nonexistent/strata' does not exist"),
      std::string::npos)
      << nvme.err;
  EXPECT_EQ(nvme.out.find("preparing the corpus"), std::string::npos)
      << nvme.out;
}

// A run does not write one output over another, or over a file it reads.
TEST(CliErrorTest, OutputsThatCollideAreRefused) {
  ::strata::testing::TempDir dir;
  const std::string same = dir.path() + "/same.json";
  std::vector<std::string> twice = TinyTrain(dir.path());
  twice.insert(twice.end(), {"--json=" + same, "--timeline=" + same});
  const Result r = Strata(twice);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--timeline and --json both name " + same),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(same));
  const std::string corpus = dir.path() + "/corpus.txt";
  std::ofstream(corpus) << "some text\n";
  const Result over = Strata({"train", "--corpus=" + corpus,
                              "--json=" + dir.path() + "/./corpus.txt"});
  EXPECT_EQ(over.rc, 2);
  EXPECT_NE(over.err.find("is the file --corpus reads"), std::string::npos)
      << over.err;
  EXPECT_EQ(ReadFile(corpus), "some text\n");
}

}  // namespace
}  // namespace strata
