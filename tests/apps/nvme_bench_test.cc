// `strata bench -t nvme` at a tiny size: it measures both directions, checks
// its bytes, and either reports fio side by side or says why not. Also the
// pieces the NVMe benches share: the directory check, MeasureNvmeTier's
// read-back check and the bench pattern.
#include "apps/bench/nvme_bench.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "base/bench_pattern.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

TEST(NvmeBenchTest, TinyRunMeasuresBothDirectionsAndLeavesNothing) {
  ::strata::testing::TempDir dir;
  NvmeBenchConfig c;
  c.directory = dir.path();
  c.size_bytes = 8 << 20;
  c.block_bytes = 1 << 20;
  c.queue_depth = 4;
  c.samples = 1;
  absl::StatusOr<NvmeBenchResult> r = RunNvmeBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->read_gbps, 0);
  EXPECT_GT(r->write_gbps, 0);
  EXPECT_FALSE(r->engine.empty());
  EXPECT_EQ(r->fio_read_gbps.has_value(), r->fio_write_gbps.has_value());
  EXPECT_TRUE(r->fio_read_gbps.has_value() || !r->fio_note.empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "files left behind";
}

TEST(NvmeBenchTest, MissingDirectoryIsAClearError) {
  NvmeBenchConfig c;
  c.directory = "/nonexistent/strata-bench";
  c.size_bytes = 1 << 20;
  absl::StatusOr<NvmeBenchResult> r = RunNvmeBench(c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

TEST(CheckBenchDirectoryTest, WritableDirectoryWithRoomIsOk) {
  ::strata::testing::TempDir dir;
  EXPECT_TRUE(CheckBenchDirectory(dir.path(), 1 << 20).ok());
}

TEST(CheckBenchDirectoryTest, MissingDirectoryIsNotFound) {
  const absl::Status s =
      CheckBenchDirectory("/nonexistent/strata-bench", 1 << 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("/nonexistent/strata-bench"), std::string::npos);
  EXPECT_NE(s.message().find("--nvme-dir"), std::string::npos) << s;
}

TEST(CheckBenchDirectoryTest, PlainFileIsFailedPrecondition) {
  ::strata::testing::TempDir dir;
  const std::string file = dir.path() + "/plain";
  ASSERT_EQ(close(creat(file.c_str(), 0600)), 0);
  const absl::Status s = CheckBenchDirectory(file, 1 << 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("not a directory"), std::string::npos) << s;
}

TEST(CheckBenchDirectoryTest, UnwritableDirectoryIsPermissionDenied) {
  ::strata::testing::TempDir root;
  const std::string dir = root.path() + "/ro";
  ASSERT_EQ(mkdir(dir.c_str(), 0555), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  if (access(dir.c_str(), W_OK) != 0) {
    const absl::Status s = CheckBenchDirectory(dir, 1 << 20);
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
        const absl::Status s = CheckBenchDirectory(dir, 1 << 20);
        std::_Exit(absl::IsPermissionDenied(s) &&
                           s.message().find(dir) != std::string::npos
                       ? 0
                       : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CheckBenchDirectoryTest, TooLittleSpaceIsResourceExhaustedWithSizes) {
  ::strata::testing::TempDir dir;
  const uint64_t absurd = FreeBytes(dir.path()) + (uint64_t{1} << 40);
  const absl::Status s = CheckBenchDirectory(dir.path(), absurd, "--size-x");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find(dir.path()), std::string::npos) << s;
  EXPECT_NE(s.message().find("free"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--size-x"), std::string::npos) << s;
  // Free space just above the request but inside the margin is refused too.
  const uint64_t free_bytes = FreeBytes(dir.path());
  EXPECT_TRUE(absl::IsResourceExhausted(
      CheckBenchDirectory(dir.path(), free_bytes - kBenchDiskMarginBytes / 2)));
  EXPECT_TRUE(
      absl::IsResourceExhausted(CheckBenchDirectory(dir.path(), UINT64_MAX)));
}

TEST(NvmeBenchTest, TooLittleSpaceCreatesNothing) {
  ::strata::testing::TempDir dir;
  NvmeBenchConfig c;
  c.directory = dir.path();
  c.size_bytes = FreeBytes(dir.path()) + (uint64_t{1} << 40);
  absl::StatusOr<NvmeBenchResult> r = RunNvmeBench(c);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted)
      << r.status();
  EXPECT_NE(r.status().message().find("--bench-size"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(RunFioTest, MissingFioIsANoteAndLeavesNothing) {
  ::strata::testing::TempDir dir;
  ::strata::testing::TempDir empty_path;
  const std::string old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", empty_path.path().c_str(), 1);
  const FioRates fio = RunFio(dir.path(), 1 << 20, 64 << 10, 4, 1);
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_FALSE(fio.read_gbps.has_value());
  EXPECT_FALSE(fio.write_gbps.has_value());
  EXPECT_NE(fio.note.find("apt-get install fio"), std::string::npos)
      << fio.note;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MeasureNvmeTierTest, CorruptReadsAreDataLoss) {
  ::strata::testing::TempDir dir;
  constexpr uint64_t kBytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<HostArena>> buffer =
      HostArena::Create(kBytes, false, nullptr);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  FillBenchPattern((*buffer)->base(), kBytes, 0);
  NvmeMeasureConfig m;
  m.nvme.directories = {dir.path()};
  m.nvme.block_size_bytes = 64 << 10;
  m.nvme.queue_depth = 4;
  m.bytes = kBytes;
  m.samples = 1;
  m.wrap_io = [](std::unique_ptr<BlockIo> io) -> std::unique_ptr<BlockIo> {
    FaultSpec spec;
    spec.rate = 1.0;
    spec.ops = FaultOps::kReads;
    spec.kind = FaultKind::kBitFlip;
    return std::make_unique<FaultyBlockIo>(std::move(io), spec);
  };
  absl::StatusOr<NvmeMeasurement> r =
      MeasureNvmeTier(m, (*buffer)->base(), kBytes);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MeasureNvmeTierTest, AdaptiveBytesStayWithinBoundsInWholeBlocks) {
  ::strata::testing::TempDir dir;
  constexpr uint64_t kBytes = 4 << 20;
  absl::StatusOr<std::unique_ptr<HostArena>> buffer =
      HostArena::Create(kBytes, false, nullptr);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  FillBenchPattern((*buffer)->base(), kBytes, 0);
  NvmeMeasureConfig m;
  m.nvme.directories = {dir.path()};
  m.nvme.block_size_bytes = 16 << 10;
  m.nvme.queue_depth = 2;
  m.bytes = kBytes;
  m.samples = 1;
  m.target_sample_seconds = 1e-6;  // as small as allowed: the probe size
  absl::StatusOr<NvmeMeasurement> r =
      MeasureNvmeTier(m, (*buffer)->base(), kBytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sample_bytes, uint64_t{1} << 20);  // max(block x depth, 1 MiB)
  EXPECT_GT(r->read_gbps, 0);
  EXPECT_GT(r->write_gbps, 0);
  // The buffer holds the pattern again for the next measurement.
  EXPECT_FALSE(FindPatternMismatch((*buffer)->base(), kBytes, 0).has_value());
}

TEST(BenchPatternTest, DependsOnSeedAndOffset) {
  std::vector<std::byte> a(4099), b(4099);
  FillBenchPattern(a.data(), a.size(), 3);
  EXPECT_FALSE(FindPatternMismatch(a.data(), a.size(), 3).has_value());
  EXPECT_EQ(FindPatternMismatch(a.data(), a.size(), 4), uint64_t{0});
  a[4098] ^= std::byte{1};  // in the odd tail
  EXPECT_EQ(FindPatternMismatch(a.data(), a.size(), 3), uint64_t{4098});
  FillBenchPattern(b.data(), b.size(), 3);
  // A block moved to another offset does not match.
  EXPECT_TRUE(FindPatternMismatch(b.data() + 8, 4096, 3).has_value());
}

}  // namespace
}  // namespace strata
