// bench_command_test.cc: `strata bench` end to end at tiny sizes — every case
// that applies here runs and verifies its data, the JSON report parses and has
// the documented keys, the machine profile round-trips into StoreOptions, and
// bad input is refused before anything runs.
#include "apps/bench/bench_command.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "gtest/gtest.h"
#include "strata/profile.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

using ::strata::testing::TempDir;

BenchRequest QuickRequest(const TempDir& dir) {
  BenchRequest r;
  r.quick = true;
  r.store.device.backend = DeviceBackendKind::kSimulated;
  r.store.nvme.directories = {dir.path()};
  r.store.nvme.block_size_bytes = 64 << 10;
  r.store.nvme.queue_depth = 4;
  r.store.nvme.budget_bytes = 64 << 20;
  r.store.device.budget_bytes = 16 << 20;
  r.store.host.budget_bytes = 16 << 20;
  r.store.host.lock_memory = false;
  r.json_path = dir.path() + "/bench.json";
  return r;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

bool HasPoints(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_array() || j[key].empty()) return false;
  for (const auto& p : j[key]) {
    if (p.at("bytes").get<uint64_t>() == 0 ||
        !(p.at("gbps").get<double>() > 0)) {
      return false;
    }
  }
  return true;
}

TEST(BenchCommandTest, EveryCaseRunsAndTheJsonHasItsKeys) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  ASSERT_EQ(RunBench(r), 0);
  const nlohmann::json j = ReadJson(r.json_path);
  ASSERT_TRUE(j.contains("link"));
  EXPECT_TRUE(j["link"]["applies"].get<bool>());
  EXPECT_EQ(j["link"]["device"], "simulated");
  for (const char* key :
       {"h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable", "d2d"}) {
    EXPECT_TRUE(HasPoints(j["link"], key)) << key;
  }
  ASSERT_TRUE(j.contains("link-um"));
  EXPECT_FALSE(j["link-um"]["applies"].get<bool>());
  EXPECT_FALSE(j["link-um"]["why_not"].get<std::string>().empty());
  ASSERT_TRUE(j.contains("nvme"));
  EXPECT_GT(j["nvme"]["read_gbps"].get<double>(), 0);
  EXPECT_GT(j["nvme"]["write_gbps"].get<double>(), 0);
  EXPECT_EQ(j["nvme"]["block_size_bytes"], 64 << 10);
  EXPECT_EQ(j["nvme"]["queue_depth"], 4);
  ASSERT_TRUE(j.contains("nvme-device"));
  EXPECT_GT(j["nvme-device"]["nvme_to_device_gbps"].get<double>(), 0);
  EXPECT_GT(j["nvme-device"]["nvme_read_gbps"].get<double>(), 0);
  EXPECT_EQ(j["nvme-device"]["verified_bytes"], 2 << 20);
  ASSERT_TRUE(j.contains("nvme-sweep"));
  ASSERT_EQ(j["nvme-sweep"]["points"].size(), 4u);  // {4, 64} KiB x QD {1, 4}
  for (const auto& p : j["nvme-sweep"]["points"]) {
    EXPECT_GT(p["read_gbps"].get<double>(), 0);
    EXPECT_GT(p["write_gbps"].get<double>(), 0);
  }
  EXPECT_GT(j["nvme-sweep"]["best"]["read_gbps"].get<double>(), 0);
  ASSERT_TRUE(j.contains("scheduler"));
  EXPECT_GT(j["scheduler"]["step_seconds"].get<double>(), 0);
  ASSERT_TRUE(j.contains("unified"));
  for (const char* run : {"copies", "unified_hints", "unified_no_hints"}) {
    EXPECT_GT(j["unified"][run]["step_seconds"].get<double>(), 0) << run;
    EXPECT_GT(j["unified"][run]["h2d_bytes_per_step"].get<double>(), 0) << run;
  }
  // Copies never fault; without hints every miss is a fault, and pages go
  // back to the host by faults too.
  EXPECT_EQ(j["unified"]["copies"]["faults_per_step"].get<double>(), 0);
  EXPECT_GT(j["unified"]["unified_no_hints"]["faults_per_step"].get<double>(),
            0);
  EXPECT_GT(
      j["unified"]["unified_no_hints"]["d2h_bytes_per_step"].get<double>(), 0);
  // Nothing is left in the NVMe directory but the report.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "bench.json");
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(BenchCommandTest, ProfileRoundTripsIntoStoreOptions) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "link";
  r.profile_path = dir.path() + "/profile.json";
  ASSERT_EQ(RunBench(r), 0);
  // An exact name selects that case only, not link-um as a prefix would.
  const nlohmann::json j = ReadJson(r.json_path);
  EXPECT_TRUE(j.contains("link"));
  EXPECT_FALSE(j.contains("link-um"));
  absl::StatusOr<MachineProfile> p = LoadMachineProfile(r.profile_path);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device, "simulated");
  ASSERT_EQ(p->h2d.size(), 2u);
  EXPECT_EQ(p->h2d[0].bytes, 64u << 10);
  EXPECT_GT(p->h2d[0].gbps, 0);
  ASSERT_EQ(p->d2h.size(), 2u);
  StoreOptions options;
  ApplyMachineProfile(*p, &options);  // no NVMe sweep ran: NVMe untouched
  EXPECT_EQ(options.nvme.block_size_bytes,
            StoreOptions().nvme.block_size_bytes);
}

TEST(BenchCommandTest, SweepSetsTheProfilesNvmeSettingAndPlots) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "nvme-sweep";
  r.profile_path = dir.path() + "/profile.json";
  const bool gnuplot = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  if (gnuplot) r.plot_path = dir.path() + "/sweep.png";
  ASSERT_EQ(RunBench(r), 0);
  const nlohmann::json j = ReadJson(r.json_path);
  absl::StatusOr<MachineProfile> p = LoadMachineProfile(r.profile_path);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->nvme_block_size_bytes,
            j["nvme-sweep"]["best"]["block_size_bytes"].get<uint64_t>());
  EXPECT_EQ(p->nvme_queue_depth,
            j["nvme-sweep"]["best"]["queue_depth"].get<uint32_t>());
  StoreOptions options;
  ApplyMachineProfile(*p, &options);
  EXPECT_EQ(options.nvme.block_size_bytes, p->nvme_block_size_bytes);
  EXPECT_EQ(options.nvme.queue_depth, p->nvme_queue_depth);
  if (gnuplot) {
    std::ifstream png(r.plot_path, std::ios::binary);
    char magic[8] = {};
    png.read(magic, 8);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  }
}

TEST(BenchCommandTest, PlotWithoutTheSweepFails) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "link";
  r.plot_path = dir.path() + "/sweep.png";
  EXPECT_EQ(RunBench(r), 2);
  EXPECT_FALSE(std::filesystem::exists(r.plot_path));
}

TEST(BenchCommandTest, BadInputIsRefusedBeforeAnythingRuns) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "no-such-case";
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.json_path = dir.path() + "/missing-dir/bench.json";
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.json_path = dir.path();  // a directory
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.json_path = "/proc/strata-bench.json";  // a file system that refuses it
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.selector = "link";
  r.profile_path = r.json_path;  // two outputs, one file
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.store.nvme.block_size_bytes = 4097;
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.store.nvme.queue_depth = 0;
  EXPECT_EQ(RunBench(r), 2);
  r = QuickRequest(dir);
  r.quick = false;
  r.selector = "nvme";
  r.nvme_bytes = 5000;  // not a whole number of blocks
  EXPECT_EQ(RunBench(r), 2);
  // --quick does not hide a --bench-size given with it.
  r = QuickRequest(dir);
  r.selector = "nvme";
  r.nvme_bytes = 0;
  r.size_given = true;
  EXPECT_EQ(RunBench(r), 2);
  // More than the disk holds: refused before the case runs, no JSON left.
  r.nvme_bytes = uint64_t{1} << 60;
  EXPECT_EQ(RunBench(r), 2);
  EXPECT_FALSE(std::filesystem::exists(r.json_path));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/missing-dir"));
}

// Under --quick the NVMe case moves 4 MiB, unless --bench-size says how
// much.
TEST(BenchCommandTest, QuickTakesAGivenBenchSize) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "nvme";
  ASSERT_EQ(RunBench(r), 0);
  EXPECT_EQ(ReadJson(r.json_path)["nvme"]["size_bytes"], 4u << 20);
  r.nvme_bytes = 2 << 20;
  r.size_given = true;
  ASSERT_EQ(RunBench(r), 0);
  EXPECT_EQ(ReadJson(r.json_path)["nvme"]["size_bytes"], 2u << 20);
}

TEST(BenchCommandTest, ProfileWithoutAMeasuringCaseFails) {
  TempDir dir;
  BenchRequest r = QuickRequest(dir);
  r.selector = "scheduler";  // measures no part of the profile
  r.profile_path = dir.path() + "/profile.json";
  EXPECT_EQ(RunBench(r), 2);
  r.selector = "link-um";  // not a case that measures it either
  EXPECT_EQ(RunBench(r), 2);
  EXPECT_FALSE(std::filesystem::exists(r.profile_path));
}

}  // namespace
}  // namespace strata
