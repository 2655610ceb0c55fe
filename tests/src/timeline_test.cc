// The store's timeline: transfers and lease spans land in Chrome trace-event
// JSON on named tracks; it is refused when off.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "strata/store.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

TEST(TimelineTest, TransfersAndLeasesBecomeTraceEvents) {
  ::strata::testing::TempDir dir;
  StoreOptions o = ::strata::testing::SmallStoreOptions(dir.path(), kMiB,
                                                        4 * kMiB, 16 * kMiB);
  o.timeline = true;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  // Above 64 KiB: a smaller tensor would reach the device through a host
  // copy (StageOnHost), not straight from NVMe.
  auto id = (*store)->Create({.name = "w0", .size_bytes = 100000});
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(
      (*store)
          ->Write(*id, ::strata::testing::Pattern(100000, 1).data(), 100000)
          .ok());
  ASSERT_TRUE((*store)->Evict(*id, Tier::kNvme).ok());  // host -> nvme
  {
    auto lease =
        (*store)->Acquire(*id, Tier::kDevice, Access::kRead);  // nvme -> device
    ASSERT_TRUE(lease.ok());
  }
  const std::string path = dir.path() + "/trace.json";
  ASSERT_TRUE((*store)->WriteTimeline(path).ok());
  nlohmann::json trace = nlohmann::json::parse(std::ifstream(path));
  std::set<std::string> spans, tracks;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    spans.insert(e["name"].get<std::string>() + " @ " +
                 e["cat"].get<std::string>());
    EXPECT_GE(e["dur"].get<double>(), 0.0);
  }
  EXPECT_TRUE(spans.count("w0 @ host -> nvme")) << trace.dump();
  EXPECT_TRUE(spans.count("w0 @ nvme -> device")) << trace.dump();
  EXPECT_TRUE(spans.count("w0 (read) @ lease device")) << trace.dump();
  EXPECT_TRUE(spans.count("w0 @ stall device")) << trace.dump();  // waited
  EXPECT_TRUE(spans.count("w0 (overwrite) @ lease host")) << trace.dump();
  EXPECT_TRUE(tracks.count("lease device"));
  EXPECT_FALSE(
      (*store)->WriteTimeline(dir.path() + "/no/such/dir/t.json").ok());
}

TEST(TimelineTest, OffByDefault) {
  ::strata::testing::TempDir dir;
  auto store = Store::Open(
      ::strata::testing::SmallStoreOptions(dir.path(), kMiB, kMiB, 8 * kMiB));
  ASSERT_TRUE(store.ok());
  absl::Status s = (*store)->WriteTimeline(dir.path() + "/t.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("StoreOptions::timeline"));
}

}  // namespace
}  // namespace strata
