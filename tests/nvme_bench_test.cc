// `strata bench -t nvme` at a tiny size: it measures both directions, checks
// its bytes, and either reports fio side by side or says why not.
#include "apps/nvme_bench.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

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

}  // namespace
}  // namespace strata
