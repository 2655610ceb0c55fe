// fuzz_replay_test.cc: every fuzz target replays its seed corpus
// (tests/fuzz/corpus/<target>/) and every input a campaign found
// (tests/fuzz/regressions/<target>/) as an ordinary test, in seconds: a
// finding fixed stays fixed. A target aborts on a finding, which fails its
// test with the target's message.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fuzz/fuzz_target.h"

namespace strata::fuzz {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = STRATA_FUZZ_DIR;

// The files directly in `dir`, by name (none when it does not exist).
std::vector<fs::path> FilesIn(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const Target& t : Targets()) names.push_back(t.name);
  return names;
}

class FuzzReplayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FuzzReplayTest, EveryCorpusAndRegressionInputPasses) {
  const auto& targets = Targets();
  const auto target =
      std::find_if(targets.begin(), targets.end(),
                   [](const Target& t) { return t.name == GetParam(); });
  ASSERT_NE(target, targets.end());
  const std::vector<fs::path> seeds = FilesIn(kFuzzDir / "corpus" / GetParam());
  EXPECT_GE(seeds.size(), 3u) << "a target's seeds are real files strata "
                                 "writes (tests/fuzz/make_seeds.cc)";
  for (const fs::path& seed : seeds) {
    EXPECT_TRUE(target->fn(ReadAll(seed)))
        << seed.string() << ": a seed is a valid file, and its reader "
        << "refused it";
  }
  for (const fs::path& p : FilesIn(kFuzzDir / "regressions" / GetParam())) {
    // A finding aborts, past SCOPED_TRACE: the input is named first.
    std::fprintf(stderr, "replaying %s\n", p.c_str());
    target->fn(ReadAll(p));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplayTest,
                         ::testing::ValuesIn(TargetNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Each corpus and regression folder belongs to a target: a renamed target
// never leaves its inputs unreplayed.
TEST(FuzzCorpusTest, EveryFolderHasItsTarget) {
  const std::vector<std::string> names = TargetNames();
  for (const char* kind : {"corpus", "regressions"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kFuzzDir / kind, ec)) {
      const std::string folder = e.path().filename().string();
      EXPECT_NE(std::find(names.begin(), names.end(), folder), names.end())
          << kind << "/" << folder << " names no target";
    }
  }
}

}  // namespace
}  // namespace strata::fuzz
