// cli_help_test.cc: what the `strata` binary says about itself: each
// command's help lists its own flags and no other's, grouped and with
// defaults; docs/cli.md is its help; --version; the bash completion
// completes every train flag and the values of choice flags.
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

// docs/cli.md is `strata help --markdown`, and each of its pages is what
// that command's --help prints: a flag changed without regenerating the page
// fails here (regenerate: build/default/apps/strata help --markdown >
// docs/cli.md).
TEST(CliHelpTest, ReferenceMatchesHelp) {
  const Result md = Strata({"help", "--markdown"});
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_EQ(md.out, ReadFile(STRATA_CLI_REFERENCE))
      << STRATA_CLI_REFERENCE << " differs from `strata help --markdown`: "
      << "regenerate it with strata help --markdown > docs/cli.md";
  const Result main = Strata({"--help"});
  EXPECT_NE(md.out.find("## strata\n\n```text\n" + main.out + "```\n"),
            std::string::npos);
  int pages = 0;
  for (const char* command :
       {"train", "info", "bench", "export", "scale", "help", "completion"}) {
    const Result help = Strata({"help", command});  // = strata CMD --help
    ASSERT_EQ(help.rc, 0) << command;
    EXPECT_NE(md.out.find(std::string("## strata ") + command +
                          "\n\n```text\n" + help.out + "```\n"),
              std::string::npos)
        << command;
    ++pages;
  }
  EXPECT_EQ(pages, 7);
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

}  // namespace
}  // namespace strata
