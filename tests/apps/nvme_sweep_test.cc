// nvme_sweep_test.cc: the NVMe block size x queue depth sweep at a tiny size —
// every point measured in order, the best point chosen by min(read, write),
// adaptive and fixed pass sizes, progress reports, fio beside it or a reason,
// clear errors for bad directories and sizes, and nothing left on disk.
#include "apps/bench/nvme_sweep.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <tuple>
#include <vector>

#include "tests/util/test_util.h"

namespace strata {
namespace {

NvmeSweepConfig TinySweep(const std::string& dir) {
  NvmeSweepConfig c;
  c.directory = dir;
  c.block_sizes = {4 << 10, 64 << 10};
  c.queue_depths = {1, 4};
  c.bytes_per_point = 1 << 20;
  c.samples = 3;
  return c;
}

double MinGbps(const NvmeSweepPoint& p) {
  return std::min(p.read_gbps, p.write_gbps);
}

TEST(NvmeSweepTest, TinySweepMeasuresEveryPointInOrder) {
  ::strata::testing::TempDir dir;
  NvmeSweepConfig c = TinySweep(dir.path());
  std::vector<std::tuple<int, int, std::string>> progress;
  c.progress = [&](int done, int total, const std::string& what) {
    progress.emplace_back(done, total, what);
  };
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 4u);
  const std::vector<std::pair<uint64_t, uint32_t>> order = {
      {4 << 10, 1}, {4 << 10, 4}, {64 << 10, 1}, {64 << 10, 4}};
  for (size_t i = 0; i < order.size(); ++i) {
    const NvmeSweepPoint& p = r->points[i];
    EXPECT_EQ(p.block_bytes, order[i].first);
    EXPECT_EQ(p.queue_depth, order[i].second);
    EXPECT_GT(p.read_gbps, 0);
    EXPECT_GT(p.write_gbps, 0);
    EXPECT_GT(p.sample_bytes, 0u);
    EXPECT_LE(p.sample_bytes, c.bytes_per_point);
    EXPECT_EQ(p.sample_bytes % p.block_bytes, 0u);
  }
  EXPECT_FALSE(r->engine.empty());
  EXPECT_GT(r->wall_seconds, 0);
  // The five steps (four points, fio) and the final report.
  ASSERT_EQ(progress.size(), 6u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(std::get<0>(progress[i]), static_cast<int>(i));
    EXPECT_EQ(std::get<1>(progress[i]), 5);
  }
  EXPECT_EQ(std::get<2>(progress.back()), "done");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "files left behind";
}

TEST(NvmeSweepTest, BestIsThePointWithTheHighestMinimum) {
  ::strata::testing::TempDir dir;
  NvmeSweepConfig c = TinySweep(dir.path());
  c.run_fio = false;
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto best = std::max_element(
      r->points.begin(), r->points.end(),
      [](const auto& a, const auto& b) { return MinGbps(a) < MinGbps(b); });
  EXPECT_EQ(r->best.block_bytes, best->block_bytes);
  EXPECT_EQ(r->best.queue_depth, best->queue_depth);
  EXPECT_EQ(r->best.read_gbps, best->read_gbps);
  EXPECT_EQ(r->best.write_gbps, best->write_gbps);
  for (const NvmeSweepPoint& p : r->points) {
    EXPECT_GE(MinGbps(r->best), MinGbps(p));
  }
  EXPECT_FALSE(r->fio_read_gbps.has_value());
  EXPECT_FALSE(r->fio_note.empty());
}

TEST(NvmeSweepTest, FioRunsAtTheBestPointOrSaysWhyNot) {
  ::strata::testing::TempDir dir;
  NvmeSweepConfig c = TinySweep(dir.path());
  c.block_sizes = {64 << 10};
  c.queue_depths = {4};
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fio_read_gbps.has_value(), r->fio_write_gbps.has_value());
  if (r->fio_read_gbps) {
    EXPECT_GT(*r->fio_read_gbps, 0);
    EXPECT_GT(*r->fio_write_gbps, 0);
  } else {
    EXPECT_FALSE(r->fio_note.empty());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "fio left its file";
}

TEST(NvmeSweepTest, FixedPassSizeMovesBytesPerPoint) {
  ::strata::testing::TempDir dir;
  NvmeSweepConfig c = TinySweep(dir.path());
  c.seconds_per_sample = 0;
  c.run_fio = false;
  c.block_sizes = {64 << 10, 2 << 20};  // 2 MiB > bytes_per_point: one block
  c.queue_depths = {2};
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  EXPECT_EQ(r->points[0].sample_bytes, c.bytes_per_point);
  EXPECT_EQ(r->points[1].sample_bytes, uint64_t{2} << 20);
}

TEST(NvmeSweepTest, MissingDirectoryIsNotFound) {
  NvmeSweepConfig c = TinySweep("/nonexistent/strata-sweep");
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_NE(r.status().message().find("/nonexistent/strata-sweep"),
            std::string::npos);
}

TEST(NvmeSweepTest, PlainFileIsFailedPrecondition) {
  ::strata::testing::TempDir dir;
  const std::string file = dir.path() + "/plain";
  ASSERT_EQ(close(creat(file.c_str(), 0600)), 0);
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(TinySweep(file));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();
}

TEST(NvmeSweepTest, UnwritableDirectoryIsPermissionDenied) {
  ::strata::testing::TempDir root;
  const std::string dir = root.path() + "/ro";
  ASSERT_EQ(mkdir(dir.c_str(), 0555), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  if (access(dir.c_str(), W_OK) != 0) {
    const absl::Status s = RunNvmeSweep(TinySweep(dir)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    return;
  }
  // Root writes anywhere: check as "nobody" in a child process instead.
  if (geteuid() != 0) GTEST_SKIP() << "0555 directory is writable here";
  ASSERT_EQ(chmod(root.path().c_str(), 0755), 0);
  // The default "fast" style forks: the child runs only the statement, so
  // the parent's TempDir is the only one and it cleans it up.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(
      {
        if (setgid(65534) != 0 || setuid(65534) != 0) std::_Exit(2);
        const absl::Status s = RunNvmeSweep(TinySweep(dir)).status();
        std::_Exit(absl::IsPermissionDenied(s) &&
                           s.message().find("not writable") != std::string::npos
                       ? 0
                       : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(NvmeSweepTest, AbsurdSizeIsResourceExhaustedAndCreatesNothing) {
  ::strata::testing::TempDir dir;
  struct statvfs vfs;
  ASSERT_EQ(statvfs(dir.path().c_str(), &vfs), 0);
  NvmeSweepConfig c = TinySweep(dir.path());
  c.bytes_per_point =
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize + (uint64_t{1} << 40);
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
      << r.status();
  EXPECT_NE(r.status().message().find("--bench-size"), std::string::npos);
  EXPECT_NE(r.status().message().find(dir.path()), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(NvmeSweepTest, BadGridIsInvalidArgument) {
  ::strata::testing::TempDir dir;
  NvmeSweepConfig c = TinySweep(dir.path());
  c.block_sizes = {4096 + 512};
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeSweep(c).status()));
  c = TinySweep(dir.path());
  c.block_sizes = {128 << 20};
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeSweep(c).status()));
  c = TinySweep(dir.path());
  c.queue_depths = {};
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeSweep(c).status()));
  c = TinySweep(dir.path());
  c.queue_depths = {4, 0};
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeSweep(c).status()));
  c = TinySweep(dir.path());
  c.samples = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeSweep(c).status()));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace strata
