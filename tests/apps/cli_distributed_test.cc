// cli_distributed_test.cc: --distributed: two ranks under mpirun train the
// losses one rank gives with --accumulate=2 (and the same OpenBLAS threads),
// bit for bit, for the MLP and the GPT, save, resume and export their shards;
// what a sharded run does not take is refused before MPI starts.
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

// TinyTrain's run for six steps instead of three.
std::vector<std::string> TinyTrainSixSteps(const std::string& dir) {
  std::vector<std::string> run = TinyTrain(dir);
  std::replace(run.begin(), run.end(), std::string("--max-steps=3"),
               std::string("--max-steps=6"));
  return run;
}

// The sharded six-step run of ResumesFromTheNewestStepEveryRankSavedBitwise:
// two ranks under mpirun, one OpenBLAS thread each.
struct ShardedRun {
  std::vector<std::string> args;
  std::string mpirun =
      "OPENBLAS_NUM_THREADS=1 " + Mpirun() + " -np 2 -x OPENBLAS_NUM_THREADS";

  // The run with `extra` flags appended.
  Result With(const std::vector<std::string>& extra) const {
    std::vector<std::string> all = args;
    all.insert(all.end(), extra.begin(), extra.end());
    return Strata(all, mpirun);
  }
};

// The uninterrupted run, then a saving one whose rank 1 never finished its
// step-6 save: the resume starts at step 3 on both ranks, keeps rank 0's
// unmatched step 6 aside, and trains the uninterrupted run's last losses.
void ExpectResumeFromStepBothSaved(const std::string& dir,
                                   const ShardedRun& run,
                                   const std::string& save) {
  const Result whole = run.With({"--json=" + dir + "/whole.json"});
  ASSERT_EQ(whole.rc, 0) << whole.err;
  // --keep=1: a sharded rank keeps one more, so that a crash between the
  // ranks' saves of one step leaves the step before on every rank.
  const Result saved =
      run.With({"--save-dir=" + save, "--save-every=3", "--keep=1"});
  ASSERT_EQ(saved.rc, 0) << saved.err;
  // Rank 1 never finished its step-6 save.
  const std::string rank0 = save + "/rank-0-of-2/step-00000006";
  ASSERT_TRUE(std::filesystem::exists(rank0 + "/manifest.json"));
  std::filesystem::remove_all(save + "/rank-1-of-2/step-00000006");
  const Result resumed = run.With({"--save-dir=" + save, "--resume=" + save,
                                   "--json=" + dir + "/resumed.json"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("renamed " + rank0 + ".unmatched, kept"),
            std::string::npos)
      << resumed.err;
  EXPECT_TRUE(std::filesystem::exists(rank0 + ".unmatched/manifest.json"));
  const nlohmann::json a = ReadJson(dir + "/whole.json");
  const nlohmann::json b = ReadJson(dir + "/resumed.json");
  EXPECT_EQ(b["resume_step"], 3);
  const std::vector<double> all = a["losses"].get<std::vector<double>>();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(b["losses"].get<std::vector<double>>(),
            std::vector<double>(all.begin() + 3, all.end()));
}

// A rank's checkpoint holds slices: export refuses it, naming the shard. The
// save dir's export gathers the slices: byte for byte the export of one rank
// accumulating two micro-batches for the same six steps.
void ExpectExportGathersTheSlices(const std::string& dir,
                                  const std::string& save) {
  const Result slice = Strata({"export", save + "/rank-1-of-2",
                               "--safetensors=" + dir + "/slice.safetensors"});
  EXPECT_EQ(slice.rc, 2) << slice.err;
  EXPECT_NE(slice.err.find("rank 1's shard of a run sharded over 2"),
            std::string::npos)
      << slice.err;
  const std::string gathered = dir + "/gathered.safetensors";
  const Result exported = Strata({"export", save, "--safetensors=" + gathered});
  ASSERT_EQ(exported.rc, 0) << exported.err;
  std::vector<std::string> one = TinyTrainSixSteps(dir);
  one.insert(one.end(), {"--accumulate=2", "--save-dir=" + dir + "/one"});
  ASSERT_EQ(Strata(one, "OPENBLAS_NUM_THREADS=1").rc, 0);
  const std::string single = dir + "/one.safetensors";
  ASSERT_EQ(Strata({"export", dir + "/one", "--safetensors=" + single}).rc, 0);
  EXPECT_EQ(ReadFile(gathered), ReadFile(single));
}

// A save dir `dir`/`name` holding rank 0's directory from `from0`, rank 1's
// from `from1`, each `rank0`/`rank1` there; returns its path.
std::string AssembleSaveDir(const std::string& dir, const std::string& name,
                            const std::string& from0, const std::string& rank0,
                            const std::string& from1,
                            const std::string& rank1) {
  const std::string to = dir + "/" + name;
  std::filesystem::create_directory(to);
  const auto deep = std::filesystem::copy_options::recursive;
  std::filesystem::copy(from0 + "/" + rank0, to + "/rank-0-of-2", deep);
  std::filesystem::copy(from1 + "/" + rank1, to + "/rank-1-of-2", deep);
  return to;
}

// Rank directories under each other's names, or of two runs, are refused by
// export and by resume; a save dir holds one run.
void ExpectMixedRankDirectoriesRefused(const std::string& dir,
                                       const ShardedRun& run,
                                       const std::string& save) {
  const std::string swapped =
      AssembleSaveDir(dir, "swapped", save, "rank-1-of-2", save, "rank-0-of-2");
  const Result wrong =
      Strata({"export", swapped, "--safetensors=" + dir + "/w.safetensors"});
  EXPECT_EQ(wrong.rc, 2) << wrong.err;
  EXPECT_NE(wrong.err.find("back under its own name"), std::string::npos)
      << wrong.err;
  const std::string other = dir + "/other";
  ASSERT_EQ(run.With({"--save-dir=" + other, "--seed=2", "--max-steps=3"}).rc,
            0);
  const std::string mixed =
      AssembleSaveDir(dir, "mixed", save, "rank-0-of-2", other, "rank-1-of-2");
  const Result mix = run.With({"--resume=" + mixed});
  EXPECT_EQ(mix.rc, 2) << mix.err;
  EXPECT_NE(mix.err.find("different runs"), std::string::npos) << mix.err;
  const Result unsharded =
      Strata({"train", "--model=mlp", "--save-dir=" + save});
  EXPECT_EQ(unsharded.rc, 2) << unsharded.err;
  EXPECT_NE(unsharded.err.find("one save dir holds one run"), std::string::npos)
      << unsharded.err;
}

// Another rank count, a rank's directory missing, or one step directory, is
// refused before MPI work.
void ExpectRefusedBeforeMpiWork(const std::string& dir,
                                const std::string& save) {
  const Result three =
      Strata({"train", "--model=mlp", "--distributed", "--resume=" + save},
             "OMPI_COMM_WORLD_SIZE=3 OMPI_COMM_WORLD_RANK=0");
  EXPECT_EQ(three.rc, 2) << three.err;
  EXPECT_NE(
      three.err.find("a 2-rank run's directories; resume it with mpirun -np 2"),
      std::string::npos)
      << three.err;
  // Rank 1's directory gone from a 2-rank run's save dir: named as missing.
  const std::string lonely = dir + "/lonely";
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

// A crash between two ranks' saves leaves one rank a step ahead: the ranks
// resume from the newest step both saved, bitwise the uninterrupted run,
// and the unmatched newer checkpoint is kept aside, not deleted. Each phase
// below stops the test at its first fatal failure, as one body would.
TEST(CliDistributedTest, ResumesFromTheNewestStepEveryRankSavedBitwise) {
  if (!HasFashionMnist()) GTEST_SKIP() << "dataset-fashion-mnist missing";
  if (!HasMpirun()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  ::strata::testing::TempDir dir;
  ShardedRun run{.args = TinyTrainSixSteps(dir.path())};
  run.args.push_back("--distributed");
  const std::string save = dir.path() + "/save";
  ExpectResumeFromStepBothSaved(dir.path(), run, save);
  if (HasFatalFailure()) return;
  ExpectExportGathersTheSlices(dir.path(), save);
  if (HasFatalFailure()) return;
  ExpectMixedRankDirectoriesRefused(dir.path(), run, save);
  if (HasFatalFailure()) return;
  ExpectRefusedBeforeMpiWork(dir.path(), save);
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

}  // namespace
}  // namespace strata
