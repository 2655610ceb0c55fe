// nvme_device_bench_test.cc: the NVMe -> device bench at a tiny size on the
// simulated device — a positive rate through the store's pipeline and for the
// NVMe baseline, every byte checked on the device, clear errors for budgets
// and directories, and nothing left on disk.
#include "apps/bench/nvme_device_bench.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <filesystem>

#include "tests/util/test_util.h"

namespace strata {
namespace {

NvmeDeviceBenchConfig Tiny(const std::string& dir) {
  NvmeDeviceBenchConfig c;
  c.store =
      ::strata::testing::SmallStoreOptions(dir, 4 << 20, 4 << 20, 8 << 20);
  c.tensor_bytes = 1 << 20;
  c.tensors = 3;
  c.samples = 3;
  return c;
}

TEST(NvmeDeviceBenchTest, TinyRunMeasuresAndVerifiesEveryByte) {
  ::strata::testing::TempDir dir;
  absl::StatusOr<NvmeDeviceBenchResult> r =
      RunNvmeDeviceBench(Tiny(dir.path()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->nvme_to_device_gbps, 0);
  EXPECT_GT(r->nvme_read_gbps, 0);
  EXPECT_DOUBLE_EQ(r->ratio, r->nvme_to_device_gbps / r->nvme_read_gbps);
  EXPECT_EQ(r->sample_bytes, uint64_t{3} << 20);
  EXPECT_EQ(r->verified_bytes, uint64_t{3} << 20);
  EXPECT_EQ(r->device, "simulated");
  EXPECT_FALSE(r->engine.empty());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "files left behind";
}

TEST(NvmeDeviceBenchTest, OddSizesSeveralChunksAndALinkModel) {
  ::strata::testing::TempDir dir;
  NvmeDeviceBenchConfig c;
  c.store = ::strata::testing::SmallStoreOptions(dir.path(), 16 << 20, 16 << 20,
                                                 24 << 20);
  c.tensor_bytes = (9 << 20) + 100;  // 3 bounce chunks of 4 MiB, one short
  c.tensors = 2;
  c.store.device.sim_link_gbps = 20;
  absl::StatusOr<NvmeDeviceBenchResult> r = RunNvmeDeviceBench(c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->nvme_to_device_gbps, 0);
  EXPECT_LT(r->nvme_to_device_gbps, 20.0);  // the link model bounds it
  EXPECT_EQ(r->verified_bytes, 2 * c.tensor_bytes);
}

TEST(NvmeDeviceBenchTest, NoNvmeDirectoryIsInvalidArgument) {
  NvmeDeviceBenchConfig c = Tiny("/unused");
  c.store.nvme.directories.clear();
  absl::Status s = RunNvmeDeviceBench(c).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--nvme-dir"), std::string::npos) << s;
}

TEST(NvmeDeviceBenchTest, SmallBudgetsNameTheirFlag) {
  ::strata::testing::TempDir dir;
  NvmeDeviceBenchConfig c = Tiny(dir.path());
  c.tensors = 9;  // 9 MiB on an 8 MiB NVMe budget
  absl::Status s = RunNvmeDeviceBench(c).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--nvme-budget"), std::string::npos) << s;
  c = Tiny(dir.path());
  c.store.device.budget_bytes = 512 << 10;
  s = RunNvmeDeviceBench(c).status();
  EXPECT_NE(s.message().find("--device-budget"), std::string::npos) << s;
  c = Tiny(dir.path());
  c.tensors = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(RunNvmeDeviceBench(c).status()));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(NvmeDeviceBenchTest, MissingDirectoryIsNotFound) {
  absl::Status s =
      RunNvmeDeviceBench(Tiny("/nonexistent/strata-nvme-device")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST(NvmeDeviceBenchTest, TooLittleSpaceIsResourceExhaustedAndCreatesNothing) {
  ::strata::testing::TempDir dir;
  struct statvfs vfs;
  ASSERT_EQ(statvfs(dir.path().c_str(), &vfs), 0);
  NvmeDeviceBenchConfig c = Tiny(dir.path());
  c.store.nvme.budget_bytes =
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize + (uint64_t{1} << 40);
  absl::Status s = RunNvmeDeviceBench(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--nvme-budget"), std::string::npos) << s;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace strata
