// train_plot_test.cc: PlotTraining draws a PNG with gnuplot (skipped where
// gnuplot is missing), and LinkBytesPerStep turns cumulative counters into
// bytes per step.
#include "apps/cli/train_plot.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/util/test_util.h"

namespace strata {
namespace {

TEST(LinkBytesPerStepTest, DiffsTheCumulativeCounters) {
  Stats s;
  s.links[int(Link::kH2D)].bytes = 100;
  LinkBytesPerStep moved(s);
  s.links[int(Link::kH2D)].bytes = 150;
  s.links[int(Link::kNvmeRead)].bytes = 4096;
  moved.Record(s);
  s.links[int(Link::kH2D)].bytes = 400;
  moved.Record(s);
  EXPECT_EQ(moved.bytes()[int(Link::kH2D)], (std::vector<uint64_t>{50, 250}));
  EXPECT_EQ(moved.bytes()[int(Link::kNvmeRead)],
            (std::vector<uint64_t>{4096, 0}));
  EXPECT_EQ(moved.bytes()[int(Link::kD2H)], (std::vector<uint64_t>{0, 0}));
}

TEST(TrainPlotTest, DrawsAPng) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed";
  }
  ::strata::testing::TempDir dir;
  TrainPlotData d{.title = "it's a test", .eval_name = "test loss"};
  for (int i = 0; i < 50; ++i) {
    d.losses.push_back(2.3 / (1 + 0.1 * i));
    for (int l = 0; l < kNumLinks; ++l) {
      d.link_bytes[l].push_back(uint64_t(1 + l) << 20);
    }
  }
  d.evals = {{25, 0.9}, {50, 0.6}};
  const std::string png = dir.path() + "/train.png";
  const absl::Status s = PlotTraining(d, png);
  ASSERT_TRUE(s.ok()) << s;
  std::ifstream in(png, std::ios::binary);
  char sig[8] = {};
  in.read(sig, sizeof sig);
  EXPECT_EQ(std::string(sig, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
}

TEST(TrainPlotTest, NoStepsIsInvalid) {
  EXPECT_EQ(PlotTraining(TrainPlotData{}, "/tmp/x.png").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
