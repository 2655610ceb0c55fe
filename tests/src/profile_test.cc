// profile_test.cc: a machine profile round-trips through its JSON file into
// StoreOptions, and malformed files are refused with the field named.
#include "strata/profile.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

using ::strata::testing::TempDir;

MachineProfile Sample() {
  MachineProfile p;
  p.device = "simulated";
  p.h2d = {{.bytes = 1 << 20, .gbps = 10.5},
           {.bytes = 64 << 20, .gbps = 12.25}};
  p.d2h = {{.bytes = 1 << 20, .gbps = 9.5}};
  p.nvme_block_size_bytes = 256 * 1024;
  p.nvme_queue_depth = 64;
  p.nvme_read_gbps = 3.5;
  p.nvme_write_gbps = 2.75;
  p.nvme_directory = "/var/tmp";
  return p;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(ProfileTest, RoundTripsIntoStoreOptions) {
  TempDir dir;
  const std::string path = dir.path() + "/profile.json";
  ASSERT_TRUE(SaveMachineProfile(Sample(), path).ok());
  absl::StatusOr<MachineProfile> p = LoadMachineProfile(path);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device, "simulated");
  ASSERT_EQ(p->h2d.size(), 2u);
  EXPECT_EQ(p->h2d[1].bytes, 64u << 20);
  EXPECT_EQ(p->h2d[1].gbps, 12.25);
  ASSERT_EQ(p->d2h.size(), 1u);
  EXPECT_EQ(p->d2h[0].gbps, 9.5);
  EXPECT_EQ(p->nvme_read_gbps, 3.5);
  EXPECT_EQ(p->nvme_directory, "/var/tmp");
  StoreOptions options;
  options.nvme.budget_bytes = 7 * kGiB;
  ApplyMachineProfile(*p, &options);
  EXPECT_EQ(options.nvme.block_size_bytes, 256u * 1024);
  EXPECT_EQ(options.nvme.queue_depth, 64u);
  EXPECT_EQ(options.nvme.budget_bytes, 7 * kGiB);  // untouched
}

TEST(ProfileTest, UnmeasuredNvmeLeavesDefaults) {
  TempDir dir;
  const std::string path = dir.path() + "/p.json";
  MachineProfile p = Sample();
  p.nvme_block_size_bytes = 0;
  p.nvme_queue_depth = 0;
  ASSERT_TRUE(SaveMachineProfile(p, path).ok());
  absl::StatusOr<MachineProfile> back = LoadMachineProfile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  StoreOptions options;
  ApplyMachineProfile(*back, &options);
  EXPECT_EQ(options.nvme.block_size_bytes,
            StoreOptions().nvme.block_size_bytes);
  EXPECT_EQ(options.nvme.queue_depth, StoreOptions().nvme.queue_depth);
}

TEST(ProfileTest, BadFilesAreRefusedWithTheReason) {
  TempDir dir;
  const std::string path = dir.path() + "/bad.json";
  EXPECT_EQ(LoadMachineProfile(dir.path() + "/missing.json").status().code(),
            absl::StatusCode::kNotFound);
  WriteFile(path, "{not json");
  EXPECT_EQ(LoadMachineProfile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
  WriteFile(path, R"({"something": "else"})");
  absl::Status s = LoadMachineProfile(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a strata machine profile"), std::string::npos)
      << s;
  WriteFile(path,
            R"({"strata_machine_profile": 1,
                "nvme": {"block_size_bytes": 1000, "queue_depth": 8}})");
  s = LoadMachineProfile(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("block_size_bytes=1000"), std::string::npos) << s;
  WriteFile(path,
            R"({"strata_machine_profile": 1,
                "nvme": {"block_size_bytes": 4096, "queue_depth": 0}})");
  EXPECT_EQ(LoadMachineProfile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
  WriteFile(path,
            R"({"strata_machine_profile": 1,
                "link": {"h2d": [{"bytes": 4096, "gbps": -1}]}})");
  EXPECT_EQ(LoadMachineProfile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
  WriteFile(path,
            R"({"strata_machine_profile": 1,
                "nvme": {"block_size_bytes": 65536.5, "queue_depth": 8}})");
  s = LoadMachineProfile(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("whole number"), std::string::npos) << s;
  WriteFile(path,
            R"({"strata_machine_profile": 1,
                "nvme": {"block_size_bytes": -4096, "queue_depth": 8}})");
  EXPECT_EQ(LoadMachineProfile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
  WriteFile(path,
            R"({"strata_machine_profile": 1, "nvme": {"queue_depth": "x"}})");
  EXPECT_EQ(LoadMachineProfile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Found by the machine_profile and checkpoint_reader fuzz targets: nlohmann's
// get<uint64_t>() casts a float past the range (undefined behaviour) and
// wraps an integer past uint32.
TEST(ProfileTest, NumbersPastTheirTypeAreRefusedNotCast) {
  TempDir dir;
  const std::string path = dir.path() + "/bad.json";
  for (const char* text : {R"({"strata_machine_profile": 1,
            "link": {"h2d": [{"bytes": 6.6e89, "gbps": 1}]}})",
                           R"({"strata_machine_profile": 1,
            "nvme": {"block_size_bytes": 4096, "queue_depth": 4294967297}})",
                           R"({"strata_machine_profile": 1e300})"}) {
    WriteFile(path, text);
    EXPECT_EQ(LoadMachineProfile(path).status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(ProfileTest, UnwritablePathIsAnError) {
  EXPECT_FALSE(SaveMachineProfile(Sample(), "/proc/strata-no/p.json").ok());
}

}  // namespace
}  // namespace strata
