// bench_plot_test.cc: PlotNvmeSweep draws a PNG with gnuplot (skipped where
// gnuplot is missing), and says what to install, or which path failed, when
// it cannot.
#include "apps/bench/bench_plot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/util/test_util.h"

namespace strata {
namespace {

NvmeSweepResult FakeSweep() {
  NvmeSweepResult r;
  for (const uint64_t block : {4u << 10, 64u << 10, 1u << 20}) {
    for (const uint32_t depth : {1u, 16u}) {
      const double gbps = 0.0001 * static_cast<double>(block) * depth / 4096;
      r.points.push_back({block, depth, gbps, gbps * 0.8, 1 << 20});
    }
  }
  r.best = r.points.back();
  r.fio_read_gbps = r.best.read_gbps * 1.1;
  r.fio_write_gbps = r.best.write_gbps * 0.9;
  r.engine = "io_uring";
  return r;
}

bool HasGnuplot() {
  return std::system("command -v gnuplot >/dev/null 2>&1") == 0;
}

bool IsPng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[8] = {};
  in.read(sig, sizeof sig);
  static constexpr char kPng[8] = {'\x89', 'P',  'N',    'G',
                                   '\r',   '\n', '\x1a', '\n'};
  return in.gcount() == 8 && std::equal(sig, sig + 8, kPng);
}

// Sets PATH for the test's lifetime.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& path) {
    const char* old = std::getenv("PATH");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("PATH", path.c_str(), 1);
  }
  ~ScopedPath() {
    if (had_) {
      setenv("PATH", old_.c_str(), 1);
    } else {
      unsetenv("PATH");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(BenchPlotTest, DrawsAPng) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  ::strata::testing::TempDir dir;
  const std::string png = dir.path() + "/sweep.png";
  const absl::Status s = PlotNvmeSweep(FakeSweep(), png);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPng(png));
  EXPECT_GT(std::filesystem::file_size(png), 1000u);
}

TEST(BenchPlotTest, QuotesInThePathAndNoFioAreFine) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  ::strata::testing::TempDir dir;
  const std::string png = dir.path() + "/it's a \"sweep\".png";
  NvmeSweepResult r = FakeSweep();
  r.fio_read_gbps.reset();
  r.fio_write_gbps.reset();
  const absl::Status s = PlotNvmeSweep(r, png);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(IsPng(png));
}

TEST(BenchPlotTest, UnwritablePathIsAnErrnoErrorNamingIt) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  const std::string png = "/nonexistent/strata/sweep.png";
  const absl::Status s = PlotNvmeSweep(FakeSweep(), png);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find(png), std::string::npos) << s;
}

TEST(BenchPlotTest, DirectoryAsPathIsAnError) {
  if (!HasGnuplot()) GTEST_SKIP() << "gnuplot is not installed";
  ::strata::testing::TempDir dir;
  const absl::Status s = PlotNvmeSweep(FakeSweep(), dir.path());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.path()), std::string::npos) << s;
  EXPECT_TRUE(std::filesystem::is_directory(dir.path()));
}

TEST(BenchPlotTest, MissingGnuplotSaysWhatToInstall) {
  ::strata::testing::TempDir empty;
  const std::string png = empty.path() + "/sweep.png";
  absl::Status s;
  {
    ScopedPath path(empty.path());
    s = PlotNvmeSweep(FakeSweep(), png);
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("apt-get install gnuplot-nox"), std::string::npos)
      << s;
  EXPECT_FALSE(std::filesystem::exists(png));
}

TEST(BenchPlotTest, EmptyResultIsInvalidArgument) {
  ::strata::testing::TempDir dir;
  const std::string png = dir.path() + "/sweep.png";
  EXPECT_TRUE(absl::IsInvalidArgument(PlotNvmeSweep(NvmeSweepResult{}, png)));
  EXPECT_FALSE(std::filesystem::exists(png));
}

}  // namespace
}  // namespace strata
