// cli_train_test.cc: `strata train`, `strata bench` and `strata scale` run
// from the command line: --config from a report repeats the run bit for bit;
// fp16's loss scale; --plot writes a PNG; checkpoints refused before any
// work; `strata scale` prints and writes JSON.
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
