// cli_test.cc: the `strata` command line as a user meets it, by running the
// binary: each command's help lists its own flags and no other's; a
// mistyped flag or command gets the nearest name and exit code 2;
// --version; --config from a report repeats the run bit for bit; --plot
// writes a PNG; the completion script completes every train flag.
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

#include "tests/test_util.h"

namespace strata {
namespace {

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

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
Result Strata(const std::vector<std::string>& args,
              const std::string& env = "") {
  return RunShell(env + " " + STRATA_CLI, args);
}

// The flags a help page lists: the names of its lines "  --name=VALUE".
std::set<std::string> ListedFlags(const std::string& help) {
  std::set<std::string> flags;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  --", 0) != 0) continue;
    std::string name = line.substr(2, line.find_first_of("= ", 2) - 2);
    if (name.rfind("--[no]", 0) == 0) name = "--" + name.substr(6);
    flags.insert(name);
  }
  return flags;
}

TEST(CliHelpTest, EachCommandListsItsOwnFlagsOnly) {
  const Result train = Strata({"train", "--help"});
  const Result info = Strata({"info", "--help"});
  const Result bench = Strata({"bench", "--help"});
  ASSERT_EQ(train.rc, 0) << train.err;
  ASSERT_EQ(info.rc, 0) << info.err;
  ASSERT_EQ(bench.rc, 0) << bench.err;
  const std::set<std::string> t = ListedFlags(train.out);
  const std::set<std::string> i = ListedFlags(info.out);
  const std::set<std::string> b = ListedFlags(bench.out);
  for (const char* f :
       {"--model", "--width", "--layers", "--lr", "--plot", "--config",
        "--device-budget", "--prefetch", "--memory", "--timeline",
        "--distributed", "--collective-timeout"}) {
    EXPECT_TRUE(t.contains(f)) << f;
  }
  for (const char* f :
       {"--bench-size", "--list", "--quick", "--profile", "--bench-case"}) {
    EXPECT_FALSE(t.contains(f)) << f;
    EXPECT_FALSE(i.contains(f)) << f;
    EXPECT_TRUE(b.contains(f)) << f;
  }
  for (const char* f : {"--width", "--layers", "--lr", "--model"}) {
    EXPECT_FALSE(i.contains(f)) << f;
    EXPECT_FALSE(b.contains(f)) << f;
  }
  EXPECT_TRUE(i.contains("--device-budget"));
  EXPECT_TRUE(i.contains("--json"));
  EXPECT_FALSE(i.contains("--timeline"));
  EXPECT_FALSE(i.contains("--plot"));
  EXPECT_GE(t.size(), 40u);
  EXPECT_GE(b.size(), 20u);
}

// `text` with every run of spaces and newlines as one space: help wraps.
std::string OneLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!space || (!out.empty() && out.back() != ' ')) out += space ? ' ' : c;
  }
  return out;
}

TEST(CliHelpTest, GroupsDashesDefaultsAndNoSourcePaths) {
  const Result r = Strata({"train", "--help"});
  ASSERT_EQ(r.rc, 0);
  const std::string flat = OneLine(r.out);
  for (const char* group :
       {"\nModel:\n", "\nData:\n", "\nTraining:\n", "\nBudgets and tiers:\n",
        "\nScheduler:\n", "\nMemory mode:\n", "\nOutput:\n"}) {
    EXPECT_NE(r.out.find(group), std::string::npos) << group;
  }
  // The command's own defaults: the GPT's (the default model) budgets and
  // batch, the MLP's where they differ.
  EXPECT_NE(flat.find("Default: 7.5MiB; mlp: 16MiB."), std::string::npos);
  EXPECT_NE(flat.find("Default: 512MiB. "), std::string::npos);  // the same
  EXPECT_NE(flat.find("Default: 4; mlp: 256."), std::string::npos);
  EXPECT_NE(flat.find("mlp (a deep MLP on Fashion-MNIST; flags --width, "
                      "--depth, ...). Default: gpt."),
            std::string::npos);
  EXPECT_NE(r.out.find("--device-budget=SIZE"), std::string::npos);
  EXPECT_NE(r.out.find("--[no]prefetch"), std::string::npos);
  EXPECT_NE(r.out.find("--model=gpt|mlp"), std::string::npos);
  EXPECT_NE(r.out.find("(gpt) Transformer blocks."), std::string::npos);
  for (const std::string& flag : ListedFlags(r.out)) {
    EXPECT_EQ(flag.find('_'), std::string::npos) << flag;  // dashes only
  }
  EXPECT_EQ(r.out.find(".cc"), std::string::npos);
  EXPECT_EQ(r.out.find("Flags from"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes: 0 success"), std::string::npos);
  // Every flag strata defines is placed in a group (none under "Other").
  for (const char* command : {"train", "info", "bench"}) {
    EXPECT_EQ(Strata({command, "--help"}).out.find("\nOther:\n"),
              std::string::npos)
        << command;
  }
  // Each bench case sizes its own store: its page lists no tier budgets.
  const std::string bench = Strata({"bench", "--help"}).out;
  EXPECT_NE(bench.find("--block-size=SIZE"), std::string::npos);
  for (const char* budget :
       {"--device-budget=SIZE", "--host-budget=SIZE", "--nvme-budget=SIZE"}) {
    EXPECT_EQ(bench.find(budget), std::string::npos) << budget;
  }
}

TEST(CliHelpTest, HelpCommandAndMainPage) {
  EXPECT_EQ(Strata({"help", "train"}).out, Strata({"train", "--help"}).out);
  const Result main = Strata({"--help"});
  ASSERT_EQ(main.rc, 0);
  for (const char* s :
       {"  train", "  info", "  bench", "  scale", "  completion",
        "strata <command> --help", "Exit codes"}) {
    EXPECT_NE(main.out.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(main.out.find("--width"), std::string::npos);
  EXPECT_EQ(Strata({"help"}).out, main.out);
  const Result none = Strata({});
  EXPECT_EQ(none.rc, 2);
  EXPECT_EQ(none.err, main.out);
}

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

TEST(CliVersionTest, SaysWhatWasBuiltIn) {
  const Result r = Strata({"--version"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(r.out.rfind("strata 0.", 0), 0u) << r.out;
  for (const char* s : {"\ncommit:     ", "\nbuild type: ", "\ncuda:       ",
                        "\nio_uring:   yes\n", "\nmpi:        "}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  // A git checkout names its commit; a source tree without git says unknown.
  const size_t commit = r.out.find("commit:     ") + 12;
  EXPECT_GE(r.out.find('\n', commit) - commit, 7u) << r.out;
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

bool HasFashionMnist() {
  return std::filesystem::exists(
      "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}

nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(ReadFile(path));
}

// The banner and the optimizer row read as English for a small model and
// one host thread: "0.0063x the device budget", not "0.0x"; "1 thread".
TEST(CliTrainTest, SmallRatiosAndOneThreadPrintPlainly) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  ::strata::testing::TempDir dir;
  std::vector<std::string> args = TinyTrain(dir.path());
  std::replace(args.begin(), args.end(), std::string("--device-budget=1MiB"),
               std::string("--device-budget=64MiB"));
  const Result r = Strata(args, "STRATA_HOST_THREADS=1");
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t times = r.out.find("x the device budget 64 MiB");
  ASSERT_NE(times, std::string::npos) << r.out;
  const size_t open = r.out.rfind('(', times);
  const double ratio = std::stod(r.out.substr(open + 1, times - open - 1));
  EXPECT_GT(ratio, 0.001) << r.out.substr(open, times - open);
  EXPECT_LT(ratio, 0.05);
  EXPECT_NE(r.out.find(", 1 thread)"), std::string::npos) << r.out;
}

TEST(CliConfigTest, AReportAsConfigRepeatsTheRunBitwise) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  ::strata::testing::TempDir dir;
  std::vector<std::string> first = TinyTrain(dir.path());
  first.push_back("--seed=7");
  first.push_back("--json=" + dir.path() + "/a.json");
  const Result a = Strata(first);
  ASSERT_EQ(a.rc, 0) << a.err;
  const nlohmann::json ja = ReadJson(dir.path() + "/a.json");
  EXPECT_EQ(ja["model"], "mlp");
  // This tiny model's whole step fits in the device and host budgets: no
  // byte need come from NVMe (scheduler_store_test checks a floor above 0).
  EXPECT_EQ(ja["nvme_read_floor_bytes_per_step"], 0);
  EXPECT_TRUE(ja["write_backs"].is_number_unsigned());
  EXPECT_EQ(ja["config"]["model"], "mlp");
  EXPECT_EQ(ja["config"]["width"], 32);
  EXPECT_EQ(ja["config"]["seed"], 7);
  EXPECT_EQ(ja["config"]["device_budget"], "1MiB");
  EXPECT_FALSE(ja["config"].contains("json"));    // outputs are not the run
  EXPECT_FALSE(ja["config"].contains("layers"));  // the GPT's

  const Result b = Strata({"train", "--config=" + dir.path() + "/a.json",
                           "--json=" + dir.path() + "/b.json"});
  ASSERT_EQ(b.rc, 0) << b.err;
  const nlohmann::json jb = ReadJson(dir.path() + "/b.json");
  ASSERT_EQ(ja["losses"].size(), 3u);
  // Bitwise: JSON doubles round-trip exactly.
  EXPECT_EQ(ja["losses"].get<std::vector<double>>(),
            jb["losses"].get<std::vector<double>>());
  EXPECT_EQ(ja["config"], jb["config"]);

  // An explicit flag wins over the file.
  const Result c =
      Strata({"train", "--config=" + dir.path() + "/a.json", "--max-steps=2",
              "--seed=8", "--json=" + dir.path() + "/c.json"});
  ASSERT_EQ(c.rc, 0) << c.err;
  const nlohmann::json jc = ReadJson(dir.path() + "/c.json");
  EXPECT_EQ(jc["losses"].size(), 2u);
  EXPECT_EQ(jc["config"]["seed"], 8);
  EXPECT_NE(jc["losses"][0], ja["losses"][0]);
}

// --precision: the report says what the run did; nonsense combinations are
// bad input (exit 2) with the flag to change.
TEST(CliPrecisionTest, Fp16ReportsItsLossScaleAndBadCombinationsExit2) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  ::strata::testing::TempDir dir;
  std::vector<std::string> args = TinyTrain(dir.path());
  args.push_back("--precision=fp16");
  args.push_back("--json=" + dir.path() + "/r.json");
  const Result r = Strata(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json j = ReadJson(dir.path() + "/r.json");
  EXPECT_EQ(j["precision"], "fp16");
  EXPECT_EQ(j["rounding"], "nearest");
  EXPECT_GE(j["skipped_steps"].get<int64_t>(), 0);
  ASSERT_GE(j["loss_scale_history"].size(), 1u);
  EXPECT_EQ(j["loss_scale_history"][0]["scale"], 65536.0);
  EXPECT_GT(j["h2d_bytes_per_param_step"].get<double>(), 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--model=mlp", "--rounding=stochastic"}, "--rounding=stochastic"},
      {{"--model=mlp", "--loss-scale=1024"}, "--precision=fp16"},
      {{"--model=mlp", "--precision=fp16", "--loss-scale=1000"},
       "power of two"},
      {{"--model=mlp", "--precision=bf17"}, "bf17"},
      {{"--model=mlp", "--precision=fp16", "--loss-scale=65536.00000001"},
       "power of two"},
      {{"--model=gpt", "--loss-scale=1024"}, "--precision=fp16"},
      {{"--model=gpt", "--rounding=stochastic"}, "--precision=bf16 or fp16"},
  };
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> line = {"train", "--max-steps=1"};
    line.insert(line.end(), flags.begin(), flags.end());
    const Result e = Strata(line);
    EXPECT_EQ(e.rc, 2) << flags[0] << ": " << e.err;
    EXPECT_NE(e.err.find(message), std::string::npos) << e.err;
  }
}

TEST(CliConfigTest, BenchReportCarriesItsConfig) {
  ::strata::testing::TempDir dir;
  const Result a =
      Strata({"bench", "-t", "link", "--quick", "--device=simulated",
              "--queue-depth=16", "--json=" + dir.path() + "/a.json"});
  ASSERT_EQ(a.rc, 0) << a.err;
  const nlohmann::json ja = ReadJson(dir.path() + "/a.json");
  EXPECT_EQ(ja["config"]["bench_case"], "link");
  EXPECT_EQ(ja["config"]["quick"], true);
  EXPECT_EQ(ja["config"]["queue_depth"], 16);
  // Each case sizes its own store: a tier budget is refused, not ignored.
  EXPECT_FALSE(ja["config"].contains("host_budget"));
  const Result budget = Strata({"bench", "-t", "nvme", "--nvme-budget=0"});
  EXPECT_EQ(budget.rc, 2);
  EXPECT_NE(budget.err.find("--nvme-budget is not a flag of `strata bench` "
                            "(it belongs to `strata train` and `strata info`)"),
            std::string::npos)
      << budget.err;
  EXPECT_TRUE(ja.contains("link"));
  const Result b = Strata({"bench", "--config=" + dir.path() + "/a.json",
                           "--json=" + dir.path() + "/b.json"});
  ASSERT_EQ(b.rc, 0) << b.err;
  const nlohmann::json jb = ReadJson(dir.path() + "/b.json");
  EXPECT_EQ(jb["config"], ja["config"]);
  EXPECT_TRUE(jb.contains("link"));
  EXPECT_FALSE(jb.contains("scheduler"));  // the case selection came along
}

TEST(CliConfigTest, UnknownKeysAndWrongTypesNameTheKey) {
  ::strata::testing::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() + "/" + name) << text;
    return "--config=" + dir.path() + "/" + name;
  };
  const Result unknown = Strata({"train", write("u.json", R"({"widht": 8})")});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.err.find("unknown key 'widht'; did you mean 'width'?"),
            std::string::npos)
      << unknown.err;
  const Result type = Strata({"train", write("t.json", R"({"width": "8"})")});
  EXPECT_EQ(type.rc, 2);
  EXPECT_NE(type.err.find("key 'width': expected an integer, got \"8\""),
            std::string::npos)
      << type.err;
  // A sharded run's report repeats only with as many ranks.
  const Result ranks = Strata(
      {"train", write("r.json", R"({"config": {"model": "mlp", "width": 8},
                                     "distributed": {"ranks": 2}})")});
  EXPECT_EQ(ranks.rc, 2);
  EXPECT_NE(ranks.err.find("report of a 2-rank run and this is 1: launch it "
                           "with mpirun -np 2"),
            std::string::npos)
      << ranks.err;
  const Result boolean =
      Strata({"train", write("b.json", R"({"prefetch": 1})")});
  EXPECT_EQ(boolean.rc, 2);
  EXPECT_NE(boolean.err.find("key 'prefetch': expected true or false"),
            std::string::npos)
      << boolean.err;
  const Result other =
      Strata({"info", write("o.json", R"({"device-budget": "8MiB",
                                          "bench_size": "1MiB"})")});
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("key 'bench_size'"), std::string::npos) << other.err;
  // One flag set twice (dashes and underscores are the same, or one key
  // twice in an object, which JSON parsers read as the last): which wins is
  // not left to the key order. A file that is not JSON says where.
  for (const auto& [name, text, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"d.json", R"({"max-steps": 2, "max_steps": 3})",
            "keys 'max-steps' and 'max_steps' both set --max-steps; keep one"},
           {"s.json", R"({"max-steps": 2, "max-steps": 3})",
            "key 'max-steps' appears twice in one object"},
           {"c.json", R"({"max-steps": 2,})",
            "is not valid JSON: parse error at line 1"}}) {
    const Result r = Strata({"train", write(name, text)});
    EXPECT_EQ(r.rc, 2) << name;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_EQ(Strata({"train", write("bad.json", "[1, 2]")}).rc, 2);
  EXPECT_EQ(Strata({"train", "--config=" + dir.path() + "/none.json"}).rc, 2);
}

bool HasGnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

TEST(CliPlotTest, TrainPlotIsAPng) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  ::strata::testing::TempDir dir;
  std::vector<std::string> args = TinyTrain(dir.path());
  args.push_back("--plot=" + dir.path() + "/run.png");
  const Result r = Strata(args);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string png = ReadFile(dir.path() + "/run.png");
  ASSERT_GE(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // 1000 x 800 with two panels of lines: tens of KB; an empty frame is less.
  EXPECT_GT(png.size(), 10000u);
  EXPECT_NE(r.out.find("plot written to"), std::string::npos);
}

TEST(CliPlotTest, UnwritablePlotIsRefusedBeforeTraining) {
  const Result r = Strata({"train", "--plot=/nonexistent/strata/run.png"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("/nonexistent/strata/run.png"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("strata train: GPT"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("preparing the corpus"), std::string::npos) << r.err;
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

TEST(CliPlotTest, MissingGnuplotIsRefusedBeforeTraining) {
  ::strata::testing::TempDir dir;
  const Result r = Strata({"train", "--plot=" + dir.path() + "/run.png"},
                          "PATH=" + dir.path());
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("gnuplot not found on PATH"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("strata train: GPT"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("preparing the corpus"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/run.png"));
}

TEST(CliCompletionTest, CompletesEveryTrainFlagAndChoices) {
  const Result r = Strata({"completion", "bash"});
  ASSERT_EQ(r.rc, 0);
  const std::string arm_start = "    train) words=\"";
  const size_t arm = r.out.find(arm_start);
  ASSERT_NE(arm, std::string::npos) << r.out;
  const size_t from = arm + arm_start.size();
  const std::string words =
      " " + r.out.substr(from, r.out.find('\n', from) - from);
  const std::set<std::string> train =
      ListedFlags(Strata({"train", "--help"}).out);
  ASSERT_GE(train.size(), 40u);
  for (const std::string& flag : train) {
    EXPECT_NE(words.find(" " + flag), std::string::npos) << flag;
  }
  EXPECT_EQ(words.find("--bench-size"), std::string::npos);
  EXPECT_NE(words.find("--noprefetch"), std::string::npos);
  EXPECT_NE(r.out.find("--model) COMPREPLY=($(compgen -W \"gpt mlp\""),
            std::string::npos);
  EXPECT_NE(r.out.find("complete -F _strata strata"), std::string::npos);
  // The file cmake --install installs is this script.
  EXPECT_EQ(ReadFile(STRATA_COMPLETION), r.out);
}

TEST(CliCompletionTest, BashCompletesAFlagAndAValue) {
  if (std::system("command -v bash >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no bash";
  }
  ::strata::testing::TempDir dir;
  const std::string script = dir.path() + "/t.sh";
  std::ofstream(script) << "source " << STRATA_COMPLETION << "\n"
                        << "COMP_WORDS=(strata train --devi); COMP_CWORD=2\n"
                        << "_strata; echo \"${COMPREPLY[*]}\"\n"
                        << "COMP_WORDS=(strata train --model = g); "
                           "COMP_CWORD=4\n"
                        << "_strata; echo \"${COMPREPLY[*]}\"\n";
  const std::string out_path = dir.path() + "/out";
  ASSERT_EQ(std::system(("bash " + script + " >" + out_path).c_str()), 0);
  EXPECT_EQ(ReadFile(out_path), "--device= --device-budget=\ngpt\n");
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

// A --resume with nothing to resume from is refused before the corpus or
// the model is prepared, and before --save-dir is created or locked.
TEST(CliCheckpointTest, ResumeFromNothingIsRefusedBeforeAnyWork) {
  ::strata::testing::TempDir dir;
  const std::string save = dir.path() + "/new";
  const Result r = Strata({"train", "--resume=" + dir.path() + "/missing",
                           "--save-dir=" + save, "--max-steps=1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(
      r.err.find("--resume: no such directory " + dir.path() + "/missing"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(std::filesystem::exists(save));
  // Without --save-dir the refusal comes alone: no notice about saving
  // before it. A directory without a checkpoint is named as such.
  const Result alone = Strata({"train", "--resume=" + dir.path()});
  EXPECT_EQ(alone.rc, 2);
  EXPECT_EQ(
      alone.err.rfind("strata train: --resume: no complete checkpoint", 0), 0u)
      << alone.err;
}

// A run refused for its flags creates no --save-dir; a resumed run without
// --save-dir says it saves nothing once it resumes, not before a refusal.
TEST(CliCheckpointTest, ARefusedRunLeavesNoSaveDirAndNoResumeNotice) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  ::strata::testing::TempDir dir;
  const std::string save = dir.path() + "/ck";
  std::vector<std::string> bad = TinyTrain(dir.path());
  bad.insert(bad.end(), {"--save-dir=" + save, "--width=0"});
  EXPECT_EQ(Strata(bad).rc, 2);
  EXPECT_FALSE(std::filesystem::exists(save));
  // Refused after the save dir was made and locked (the data is checked
  // later): the directories it made go again, parents included.
  std::vector<std::string> no_data = TinyTrain(dir.path());
  no_data.insert(no_data.end(), {"--save-dir=" + dir.path() + "/new/ck",
                                 "--data-dir=" + dir.path() + "/nonexistent"});
  const Result late = Strata(no_data);
  EXPECT_NE(late.rc, 0) << late.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/new")) << late.err;
  // A file where the directory belongs is named as one.
  std::ofstream(dir.path() + "/file") << "x";
  std::vector<std::string> on_file = TinyTrain(dir.path());
  on_file.push_back("--save-dir=" + dir.path() + "/file");
  const Result file = Strata(on_file);
  EXPECT_EQ(file.rc, 2);
  EXPECT_NE(file.err.find("is a file, not a directory"), std::string::npos)
      << file.err;
  std::vector<std::string> first = TinyTrain(dir.path());
  first.push_back("--save-dir=" + save);
  ASSERT_EQ(Strata(first).rc, 0);
  std::vector<std::string> refused = TinyTrain(dir.path());
  refused.insert(refused.end(), {"--resume=" + save, "--width=0"});
  const Result r = Strata(refused);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err.rfind("strata train: --width=0", 0), 0u) << r.err;
  std::vector<std::string> resumed = TinyTrain(dir.path());
  std::replace(resumed.begin(), resumed.end(), std::string("--max-steps=3"),
               std::string("--max-steps=4"));
  resumed.push_back("--resume=" + save);
  const Result ok = Strata(resumed);
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_NE(ok.err.find("--resume without --save-dir"), std::string::npos)
      << ok.err;
  // The epoch's line counts the steps before the resume: its loss does.
  EXPECT_NE(ok.out.find("epoch 1 (4 of its 937 steps): loss "),
            std::string::npos)
      << ok.out;
  // Resumed from a step directory, the notice names the run directory
  // above it, not a checkpoint to save into.
  resumed.back() = "--resume=" + save + "/step-00000003";
  const Result step = Strata(resumed);
  EXPECT_EQ(step.rc, 0) << step.err;
  EXPECT_NE(step.err.find("add --save-dir=" + save + " to go on"),
            std::string::npos)
      << step.err;
}

// A --corpus that is not there is refused before the corpus is announced.
TEST(CliTrainTest, AMissingCorpusIsRefusedAlone) {
  ::strata::testing::TempDir dir;
  const Result r = Strata(
      {"train", "--corpus=" + dir.path() + "/missing.txt", "--max-steps=1"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("missing.txt does not exist"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("preparing the corpus"), std::string::npos) << r.out;
}

// A run that stops inside an epoch says how much of it the epoch's line
// covers.
TEST(CliTrainTest, APartialEpochSaysHowManyOfItsSteps) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  ::strata::testing::TempDir dir;
  const Result r = Strata(TinyTrain(dir.path()));
  ASSERT_EQ(r.rc, 0) << r.err;
  // 60000 images in batches of 64: 937 steps an epoch, 3 of them run.
  EXPECT_NE(r.out.find("epoch 1 (3 of its 937 steps): loss "),
            std::string::npos)
      << r.out;
}

// `strata scale`: the ZeRO-3 model on paper prints a row per shape and rank
// count and writes them as JSON; ZeRO-3's bytes; bad flags exit 2.
// --distributed: two ranks under mpirun train the losses one rank gives
// with --accumulate=2 (and the same OpenBLAS threads), bit for bit; what a
// sharded run does not take is refused before MPI starts.
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

// One rank with --accumulate=2 and two --distributed ranks, `extra` flags
// on both, at --batch=16: their reports, and the two ranks' run.
struct RankPair {
  nlohmann::json one, two;
  Result ranks;
};
RankPair TrainOneAndTwoRanks(const std::string& dir,
                             const std::vector<std::string>& extra) {
  std::vector<std::string> one = TinyTrain(dir);
  std::replace(one.begin(), one.end(), std::string("--batch=64"),
               std::string("--batch=16"));
  std::replace(one.begin(), one.end(), std::string("--device-budget=1MiB"),
               std::string("--device-budget=2MiB"));
  one.insert(one.end(), extra.begin(), extra.end());
  std::vector<std::string> two = one;
  one.insert(one.end(), {"--accumulate=2", "--json=" + dir + "/1.json"});
  two.insert(two.end(), {"--distributed", "--json=" + dir + "/2.json"});
  const std::string threads = "OPENBLAS_NUM_THREADS=1";
  RankPair p;
  const Result a = Strata(one, threads);
  EXPECT_EQ(a.rc, 0) << a.err;
  // The nvme dir is the ranks' to share: each store makes its own files.
  p.ranks =
      Strata(two, threads + " " + Mpirun() + " -np 2 -x OPENBLAS_NUM_THREADS");
  EXPECT_EQ(p.ranks.rc, 0) << p.ranks.out << p.ranks.err;
  if (a.rc != 0 || p.ranks.rc != 0) return p;
  p.one = ReadJson(dir + "/1.json");
  p.two = ReadJson(dir + "/2.json");
  EXPECT_EQ(p.one["losses"].size(), 3u);
  EXPECT_EQ(p.one["losses"].get<std::vector<double>>(),
            p.two["losses"].get<std::vector<double>>());
  EXPECT_EQ(p.one["test_accuracy"], p.two["test_accuracy"]);
  return p;
}

TEST(CliDistributedTest, TwoRanksMatchOneRankAccumulatingTwoBitwise) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  const RankPair p = TrainOneAndTwoRanks(dir.path(), {});
  ASSERT_FALSE(p.two.is_null());
  EXPECT_EQ(p.two["distributed"]["ranks"], 2);
  EXPECT_EQ(p.two["distributed"]["transport"], "mpi");
  // What a step sends, layers 784 -> 32 -> 32 -> 10 (25120, 1056 and 330
  // parameters; each rank's shards 13253 of them, 12560 in layer 0):
  // forward all-gathers every layer (13253 x 4 bytes to the other rank),
  // backward again every layer but the two the slots still hold (layer 0,
  // 12560 x 4), the loss all-gather 16 bytes; then the gradient chain: rank
  // 0 sends its whole sum (26506 x 4), rank 1 sends rank 0's shards back
  // (13253 x 4). Evaluation is not counted.
  const nlohmann::json& per_rank = p.two["distributed"]["per_rank"];
  ASSERT_EQ(per_rank.size(), 2u);
  const uint64_t gathers = 13253 * 4 + 12560 * 4 + 16;
  EXPECT_EQ(per_rank[0]["bytes_sent_per_step"], gathers + 26506 * 4);
  EXPECT_EQ(per_rank[1]["bytes_sent_per_step"], gathers + 13253 * 4);
  // Rank 0 alone prints the run.
  EXPECT_EQ(p.ranks.out.find("rank 0 of 2"), p.ranks.out.rfind("rank 0 of 2"));
}

TEST(CliDistributedTest, Bf16ShardsMatchOneRankAccumulatingTwoBitwise) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  const RankPair p = TrainOneAndTwoRanks(
      dir.path(), {"--precision=bf16", "--rounding=stochastic"});
  ASSERT_FALSE(p.two.is_null());
  EXPECT_EQ(p.two["config"]["precision"], "bf16");
  // The fp32 test's sends with 16-bit gathers (2 bytes a parameter), the
  // fp32 chain, and 8 bytes more: the all-gather of the non-finite counts.
  const nlohmann::json& per_rank = p.two["distributed"]["per_rank"];
  const uint64_t gathers = 13253 * 2 + 12560 * 2 + 16 + 8;
  EXPECT_EQ(per_rank[0]["bytes_sent_per_step"], gathers + 26506 * 4);
  EXPECT_EQ(per_rank[1]["bytes_sent_per_step"], gathers + 13253 * 4);
}

// The GPT sharded over two ranks (gpt_sharding.cc) at gpt_cli_check's
// micro size: bit for bit one rank with --accumulate=2 (losses, validation
// loss, the sampled text) and exactly the bytes the protocol sends.
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

TEST(CliDistributedTest, GptTwoRanksMatchOneRankAccumulatingTwoBitwise) {
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  std::vector<std::string> one = GptMicroTrain(dir.path(), 3);
  one.push_back("--sample=8");
  std::vector<std::string> two = one;
  one.insert(one.end(), {"--accumulate=2", "--json=" + dir.path() + "/1.json"});
  two.insert(two.end(), {"--distributed", "--json=" + dir.path() + "/2.json"});
  const std::string threads = "OPENBLAS_NUM_THREADS=1";
  const Result a = Strata(one, threads);
  ASSERT_EQ(a.rc, 0) << a.err;
  const Result b =
      Strata(two, threads + " " + Mpirun() + " -np 2 -x OPENBLAS_NUM_THREADS");
  ASSERT_EQ(b.rc, 0) << b.out << b.err;
  const nlohmann::json j1 = ReadJson(dir.path() + "/1.json");
  const nlohmann::json j2 = ReadJson(dir.path() + "/2.json");
  ASSERT_EQ(j1["losses"].size(), 3u);
  EXPECT_EQ(j1["losses"].get<std::vector<double>>(),
            j2["losses"].get<std::vector<double>>());
  EXPECT_EQ(j1["val_loss"], j2["val_loss"]);
  EXPECT_EQ(j1["sample"]["text"], j2["sample"]["text"]);
  // C = 32, T = 16, V = 256: a block's 12704 parameters, wte's 8192, wpe's
  // 512, the final norm's 2 x 32; every tensor splits evenly. Each rank
  // all-gathers half of the 21472 to the other (backward finds the block
  // in its slot) and its micro-batch's loss (8 bytes). Rank 0 sends its
  // sums down the chain: wte's classifier part, the final norm, the block,
  // then wte and wpe again; rank 1 sends back the classifier's total and
  // rank 0's half of every total.
  const nlohmann::json& per_rank = j2["distributed"]["per_rank"];
  ASSERT_EQ(per_rank.size(), 2u);
  const uint64_t gathers = 21472 / 2 * 4 + 8;
  EXPECT_EQ(per_rank[0]["bytes_sent_per_step"],
            gathers + (8192 + 64 + 12704 + 8192 + 512) * 4);
  EXPECT_EQ(per_rank[1]["bytes_sent_per_step"],
            gathers + 8192 * 4 + (64 + 12704 + 8192 + 512) / 2 * 4);
  // Rank 0 alone prints.
  EXPECT_EQ(b.out.find("rank 0 of 2"), b.out.rfind("rank 0 of 2"));
  EXPECT_EQ(b.err.find("step 3/3"), b.err.rfind("step 3/3"));
}

// The sharded GPT's checkpoints: each rank saves its shards in its
// rank directory; after a crash between the ranks' saves the run resumes
// from the newest step both saved, bitwise the uninterrupted run; the save
// dir's export gathers the shards into the whole tensors, byte for byte
// one rank's with --accumulate=2.
TEST(CliDistributedTest, GptSavesResumesAndExportsItsShards) {
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  const std::vector<std::string> run = GptMicroTrain(dir.path(), 4);
  const std::string mpirun =
      "OPENBLAS_NUM_THREADS=1 " + Mpirun() + " -np 2 -x OPENBLAS_NUM_THREADS";
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = run;
    args.push_back("--distributed");
    args.insert(args.end(), extra.begin(), extra.end());
    return Strata(args, mpirun);
  };
  const Result whole = with({"--json=" + dir.path() + "/whole.json"});
  ASSERT_EQ(whole.rc, 0) << whole.err;
  const std::string save = dir.path() + "/save";
  const Result saved = with({"--save-dir=" + save, "--save-every=2"});
  ASSERT_EQ(saved.rc, 0) << saved.err;
  for (const char* rank : {"/rank-0-of-2", "/rank-1-of-2"}) {
    EXPECT_TRUE(
        std::filesystem::exists(save + rank + "/step-00000004/manifest.json"))
        << rank;
  }
  std::filesystem::remove_all(save + "/rank-1-of-2/step-00000004");
  const Result resumed = with({"--save-dir=" + save, "--resume=" + save,
                               "--json=" + dir.path() + "/resumed.json"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  const nlohmann::json a = ReadJson(dir.path() + "/whole.json");
  const nlohmann::json b = ReadJson(dir.path() + "/resumed.json");
  EXPECT_EQ(b["resume_step"], 2);
  const std::vector<double> all = a["losses"].get<std::vector<double>>();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(b["losses"].get<std::vector<double>>(),
            std::vector<double>(all.begin() + 2, all.end()));
  EXPECT_EQ(a["val_loss"], b["val_loss"]);
  // Without --resume the save dir is another run's: the hint names the
  // save dir, not a rank's directory below it. Without --distributed the
  // rank directories are named for what they are.
  const Result again = with({"--save-dir=" + save});
  EXPECT_EQ(again.rc, 2) << again.err;
  EXPECT_NE(again.err.find("continue it with --resume=" + save + ","),
            std::string::npos)
      << again.err;
  std::vector<std::string> alone = run;
  alone.push_back("--resume=" + save);
  const Result unsharded = Strata(alone);
  EXPECT_EQ(unsharded.rc, 2) << unsharded.err;
  EXPECT_NE(unsharded.err.find("rank directories of a 2-rank sharded run"),
            std::string::npos)
      << unsharded.err;
  // The export: wte [256 x 32] and the rest, whole, as one rank saves them.
  const std::string gathered = dir.path() + "/gathered.safetensors";
  const Result exported = Strata({"export", save, "--safetensors=" + gathered});
  ASSERT_EQ(exported.rc, 0) << exported.err;
  std::vector<std::string> one = run;
  one.insert(one.end(),
             {"--accumulate=2", "--save-dir=" + dir.path() + "/one"});
  const Result single_run = Strata(one, "OPENBLAS_NUM_THREADS=1");
  ASSERT_EQ(single_run.rc, 0) << single_run.err;
  const std::string single = dir.path() + "/one.safetensors";
  ASSERT_EQ(
      Strata({"export", dir.path() + "/one", "--safetensors=" + single}).rc, 0);
  const std::string bytes = ReadFile(gathered);
  EXPECT_NE(bytes.find("\"wte\":{\"dtype\":\"F32\",\"shape\":[256,32]"),
            std::string::npos)
      << bytes.substr(0, 400);
  EXPECT_EQ(bytes, ReadFile(single));
  // Another run's rank directory beside these: resume refuses it, as
  // export does.
  std::filesystem::create_directory(save + "/rank-0-of-3");
  const Result beside = with({"--resume=" + save});
  EXPECT_EQ(beside.rc, 2) << beside.err;
  EXPECT_NE(beside.err.find("--resume=" + save + " holds " + save +
                            "/rank-0-of-3, a 3-rank run's"),
            std::string::npos)
      << beside.err;
}

// A crash between two ranks' saves leaves one rank a step ahead: the ranks
// resume from the newest step both saved, bitwise the uninterrupted run,
// and the unmatched newer checkpoint is kept aside, not deleted.
TEST(CliDistributedTest, ResumesFromTheNewestStepEveryRankSavedBitwise) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  std::vector<std::string> run = TinyTrain(dir.path());
  std::replace(run.begin(), run.end(), std::string("--max-steps=3"),
               std::string("--max-steps=6"));
  run.push_back("--distributed");
  const std::string mpirun =
      "OPENBLAS_NUM_THREADS=1 " + Mpirun() + " -np 2 -x OPENBLAS_NUM_THREADS";
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    return Strata(args, mpirun);
  };
  const std::string save = dir.path() + "/save";
  const Result whole = with({"--json=" + dir.path() + "/whole.json"});
  ASSERT_EQ(whole.rc, 0) << whole.err;
  // --keep=1: a sharded rank keeps one more, so that a crash between the
  // ranks' saves of one step leaves the step before on every rank.
  const Result saved =
      with({"--save-dir=" + save, "--save-every=3", "--keep=1"});
  ASSERT_EQ(saved.rc, 0) << saved.err;
  // Rank 1 never finished its step-6 save.
  const std::string rank0 = save + "/rank-0-of-2/step-00000006";
  ASSERT_TRUE(std::filesystem::exists(rank0 + "/manifest.json"));
  std::filesystem::remove_all(save + "/rank-1-of-2/step-00000006");
  const Result resumed = with({"--save-dir=" + save, "--resume=" + save,
                               "--json=" + dir.path() + "/resumed.json"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("renamed " + rank0 + ".unmatched, kept"),
            std::string::npos)
      << resumed.err;
  EXPECT_TRUE(std::filesystem::exists(rank0 + ".unmatched/manifest.json"));
  const nlohmann::json a = ReadJson(dir.path() + "/whole.json");
  const nlohmann::json b = ReadJson(dir.path() + "/resumed.json");
  EXPECT_EQ(b["resume_step"], 3);
  const std::vector<double> all = a["losses"].get<std::vector<double>>();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(b["losses"].get<std::vector<double>>(),
            std::vector<double>(all.begin() + 3, all.end()));
  // A rank's checkpoint holds slices: export refuses it, naming the shard.
  const Result slice =
      Strata({"export", save + "/rank-1-of-2",
              "--safetensors=" + dir.path() + "/slice.safetensors"});
  EXPECT_EQ(slice.rc, 2) << slice.err;
  EXPECT_NE(slice.err.find("rank 1's shard of a run sharded over 2"),
            std::string::npos)
      << slice.err;
  // The save dir's export gathers the slices: byte for byte the export of
  // one rank accumulating two micro-batches for the same six steps.
  const std::string gathered = dir.path() + "/gathered.safetensors";
  const Result exported = Strata({"export", save, "--safetensors=" + gathered});
  ASSERT_EQ(exported.rc, 0) << exported.err;
  std::vector<std::string> one = TinyTrain(dir.path());
  std::replace(one.begin(), one.end(), std::string("--max-steps=3"),
               std::string("--max-steps=6"));
  one.insert(one.end(),
             {"--accumulate=2", "--save-dir=" + dir.path() + "/one"});
  ASSERT_EQ(Strata(one, "OPENBLAS_NUM_THREADS=1").rc, 0);
  const std::string single = dir.path() + "/one.safetensors";
  ASSERT_EQ(
      Strata({"export", dir.path() + "/one", "--safetensors=" + single}).rc, 0);
  EXPECT_EQ(ReadFile(gathered), ReadFile(single));
  // Rank directories under each other's names, or of two runs, are refused
  // by export and by resume; a save dir holds one run.
  // A save dir `name` holding rank 0's directory from `from0`, rank 1's
  // from `from1`, each `rank0`/`rank1` there.
  auto assemble = [&](const std::string& name, const std::string& from0,
                      const std::string& rank0, const std::string& from1,
                      const std::string& rank1) {
    const std::string to = dir.path() + "/" + name;
    std::filesystem::create_directory(to);
    const auto deep = std::filesystem::copy_options::recursive;
    std::filesystem::copy(from0 + "/" + rank0, to + "/rank-0-of-2", deep);
    std::filesystem::copy(from1 + "/" + rank1, to + "/rank-1-of-2", deep);
    return to;
  };
  const std::string swapped =
      assemble("swapped", save, "rank-1-of-2", save, "rank-0-of-2");
  const Result wrong = Strata(
      {"export", swapped, "--safetensors=" + dir.path() + "/w.safetensors"});
  EXPECT_EQ(wrong.rc, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("back under its own name"), std::string::npos)
      << wrong.err;
  const std::string other = dir.path() + "/other";
  ASSERT_EQ(with({"--save-dir=" + other, "--seed=2", "--max-steps=3"}).rc, 0);
  const std::string mixed =
      assemble("mixed", save, "rank-0-of-2", other, "rank-1-of-2");
  const Result mix = with({"--resume=" + mixed});
  EXPECT_EQ(mix.rc, 2) << mix.err;
  EXPECT_NE(mix.err.find("different runs"), std::string::npos) << mix.err;
  const Result unsharded =
      Strata({"train", "--model=mlp", "--save-dir=" + save});
  EXPECT_EQ(unsharded.rc, 2) << unsharded.err;
  EXPECT_NE(unsharded.err.find("one save dir holds one run"), std::string::npos)
      << unsharded.err;
  // Another rank count, or one step directory, is refused before MPI work.
  const Result three =
      Strata({"train", "--model=mlp", "--distributed", "--resume=" + save},
             "OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0");
  EXPECT_EQ(three.rc, 2) << three.err;
  EXPECT_NE(
      three.err.find("a 2-rank run's directories; resume it with mpirun -np 2"),
      std::string::npos)
      << three.err;
  // Rank 1's directory gone from a 2-rank run's save dir: named as missing.
  const std::string lonely = dir.path() + "/lonely";
  std::filesystem::create_directory(lonely);
  std::filesystem::copy(save + "/rank-0-of-2", lonely + "/rank-0-of-2",
                        std::filesystem::copy_options::recursive);
  const Result missing =
      Strata({"train", "--model=mlp", "--distributed", "--resume=" + lonely},
             "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1");
  EXPECT_EQ(missing.rc, 2) << missing.err;
  EXPECT_NE(missing.err.find("this rank's is not (moved or deleted?): put "
                             "rank-1-of-2 back"),
            std::string::npos)
      << missing.err;
  const Result step =
      Strata({"train", "--model=mlp", "--distributed",
              "--resume=" + save + "/rank-0-of-2/step-00000003"});
  EXPECT_EQ(step.rc, 2) << step.err;
  EXPECT_NE(step.err.find("resumes from the --save-dir"), std::string::npos)
      << step.err;
}

// Ranks started with different flags (an MPMD launch) or OpenBLAS thread
// counts would hang, crash in MPI or train other numbers: refused, naming
// the setting, exit 2; a budget may differ.
TEST(CliDistributedTest, RanksThatDifferInASettingAreRefusedWithExitCode2) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  std::vector<std::string> rank = TinyTrain(dir.path());
  rank.erase(rank.begin());  // "train", given per rank below
  rank.push_back("--distributed");
  // Rank 0's flags (and `rank0_extra`), then rank 1's with `change`, each
  // with its threads.
  auto mpmd = [&](const std::string& change, int threads0, int threads1,
                  const std::string& rank0_extra = "") {
    std::vector<std::string> args = {
        "-np",      "1",
        "-x",       "OPENBLAS_NUM_THREADS=" + std::to_string(threads0),
        STRATA_CLI, "train"};
    args.insert(args.end(), rank.begin(), rank.end());
    if (!rank0_extra.empty()) args.push_back(rank0_extra);
    args.insert(args.end(), {":", "-np", "1", "-x",
                             "OPENBLAS_NUM_THREADS=" + std::to_string(threads1),
                             STRATA_CLI, "train"});
    args.insert(args.end(), rank.begin(), rank.end());
    args.push_back(change);
    return RunShell(Mpirun(), args);
  };
  const Result width = mpmd("--width=33", 1, 1);
  EXPECT_EQ(width.rc, 2) << width.err;
  EXPECT_NE(width.err.find("rank 1 runs with --width=33, rank 0 with "
                           "--width=32"),
            std::string::npos)
      << width.err;
  const Result threads = mpmd("--seed=1", 1, 2);
  EXPECT_EQ(threads.rc, 2) << threads.err;
  EXPECT_NE(threads.err.find("OPENBLAS_NUM_THREADS=2"), std::string::npos)
      << threads.err;
  // Rank 0 alone writes the report: one asked of rank 1 only is refused,
  // one asked of rank 0 only is written.
  const std::string r1 = dir.path() + "/r1.json";
  const Result json = mpmd("--json=" + r1, 1, 1);
  EXPECT_EQ(json.rc, 2) << json.err;
  EXPECT_NE(
      json.err.find("rank 1 was given --json=" + r1 + ", rank 0 no --json"),
      std::string::npos)
      << json.err;
  const std::string r0 = dir.path() + "/r0.json";
  const Result json0 = mpmd("--nvme-budget=32MiB", 1, 1, "--json=" + r0);
  EXPECT_EQ(json0.rc, 0) << json0.err;
  EXPECT_EQ(ReadJson(r0)["distributed"]["ranks"], 2) << json0.err;
  const Result budget = mpmd("--nvme-budget=32MiB", 1, 1);
  EXPECT_EQ(budget.rc, 0) << budget.err;
}

// A refusal of the flags every rank was given is printed once (rank 0's),
// not once per rank, and still ends the run with exit code 2.
TEST(CliDistributedTest, ARefusalOfEveryRanksFlagsIsPrintedOnce) {
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  // The refusal's flag, as the message names it: strata's checks, the
  // command line's own (an unknown flag, a value that does not parse,
  // before the flags are set), a file a flag names that is not there, and
  // refusals met after MPI started.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model=mlp", "--resident"}, "--resident"},
      {{"--model=gpt", "--resident"}, "--resident"},
      {{"--model=mlp", "--device-budgte=1GiB"}, "--device-budgte"},
      {{"--model=mlp", "--width=abc"}, "--width=abc"},
      {{"--model=mlp", "--machine-profile=/nonexistent/p.json"},
       "/nonexistent/p.json"},
      // Met after MPI started, before training: the store's directory,
      // the data, budgets the model does not fit.
      {{"--model=mlp", "--nvme-dir=/nonexistent/swap"}, "/nonexistent/swap"},
      {{"--model=mlp", "--data-dir=/nonexistent/data"}, "/nonexistent/data"},
      {{"--model=mlp", "--device-budget=1MiB"}, "device budget 1 MiB"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args = {"-np", "2", STRATA_CLI, "train",
                                     "--distributed"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Result r = RunShell(Mpirun(), args);
    EXPECT_EQ(r.rc, 2) << flags.back() << ": " << r.err;
    const size_t first = r.err.find(named);
    ASSERT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(named, first + named.size()), std::string::npos)
        << "printed twice: " << r.err;
  }
}

TEST(CliDistributedTest, WhatAShardedRunDoesNotTakeIsRefusedWithExitCode2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--distributed", "--model=mlp", "--resident"}, "--resident"},
      {{"--distributed", "--model=gpt", "--resident"}, "--resident"},
      {{"--distributed", "--model=mlp", "--collective-timeout=0"},
       "--collective-timeout"},
      {{"--model=mlp", "--collective-timeout=5"}, "add --distributed"},
  };
  for (const auto& [flags, named] : cases) {
    std::vector<std::string> args = {"train"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Result r = Strata(args);
    EXPECT_EQ(r.rc, 2) << flags.back() << ": " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    // Bad input reads as what to change, without a status code's name.
    EXPECT_EQ(r.err.find("INVALID_ARGUMENT"), std::string::npos) << r.err;
  }
}

TEST(CliScaleTest, EstimatesPrintAndWriteJson) {
  ::strata::testing::TempDir dir;
  const std::string json = dir.path() + "/scale.json";
  const Result r =
      Strata({"scale", "--shapes=gpt2-xl", "--ranks=1,8", "--json=" + json});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("gpt2-xl"), std::string::npos);
  EXPECT_NE(r.out.find("ZeRO-Infinity"), std::string::npos);
  const nlohmann::json j = ReadJson(json);
  ASSERT_EQ(j["estimates"].size(), 2u);
  const nlohmann::json& one = j["estimates"][0];
  const nlohmann::json& eight = j["estimates"][1];
  EXPECT_EQ(one["ranks"], 1);
  EXPECT_EQ(one["sent_bytes_per_step"], 0.0);
  const double p = eight["parameters"];
  EXPECT_DOUBLE_EQ(eight["sent_bytes_per_step"].get<double>(), 6 * p * 7 / 8);
  EXPECT_EQ(j["zero_infinity"].size(), 3u);
  EXPECT_EQ(j["config"]["ranks"], nlohmann::json({"1", "8"}));
}

TEST(CliScaleTest, BadFlagsAreRefusedWithExitCode2) {
  Result r = Strata({"scale", "--ranks=0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--ranks"), std::string::npos) << r.err;
  r = Strata({"scale", "--shapes=gpt5"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("known: gpt2-xl"), std::string::npos) << r.err;
  r = Strata({"scale", "--net-gbps=0"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("interconnect"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // refused before anything prints
  r = Strata({"scale", "--ranks="});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("at least one"), std::string::npos) << r.err;
  r = Strata({"scale", "--json=/nonexistent/dir/scale.json"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace strata
