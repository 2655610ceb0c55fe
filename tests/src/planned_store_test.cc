// The residency plan inside the store (src/planning.cc): a learned step is
// planned at its end, the next steps follow the plan (its loads are issued
// ahead of their acquires, its write-backs after the uses), the NVMe bytes
// a step moves are the plan's, a changed step is planned again, and no
// byte is lost on the way. SchedulerOptions::planned = false keeps the
// reactive path.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

constexpr int kTensors = 8;

class PlannedStoreTest : public ::testing::Test {
 protected:
  // A device that holds three of the 1 MiB tensors and a host that holds
  // two: a step over eight must stream through NVMe.
  void Open(bool planned, bool timeline = false) {
    StoreOptions o = ::strata::testing::SmallStoreOptions(dir_.path(), 3 * kMiB,
                                                          2 * kMiB, 64 * kMiB);
    o.scheduler.planned = planned;
    o.timeline = timeline;
    auto s = Store::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    for (int i = 0; i < kTensors; ++i) {
      auto id =
          store_->Create({.name = "t" + std::to_string(i), .size_bytes = kMiB});
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_TRUE(store_->Write(*id, Counter(0).data(), kMiB).ok());
      ids_.push_back(*id);
    }
  }
  static std::vector<std::byte> Counter(uint8_t value) {
    return std::vector<std::byte>(kMiB, std::byte{value});
  }
  // A training-like step: every tensor read in a forward pass, then in
  // reverse order read again and incremented (a byte of every 4 KiB page,
  // so the whole copy is dirty).
  void Step(int first = 0) {
    store_->BeginStep();
    for (int i = first; i < kTensors; ++i) Read(ids_[i]);
    for (int i = kTensors - 1; i >= first; --i) Increment(ids_[i]);
    store_->EndStep();
  }
  void Read(TensorId id) {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  void Increment(TensorId id) {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    auto* bytes = static_cast<uint8_t*>(lease->data());
    for (uint64_t b = 0; b < kMiB; b += 4096) ++bytes[b];
    ASSERT_TRUE(lease->Release().ok());
  }
  // Every tensor's pages hold `value` (the steps that incremented it).
  void ExpectCounts(const std::vector<uint8_t>& value) {
    for (int i = 0; i < kTensors; ++i) {
      std::vector<std::byte> got(kMiB);
      ASSERT_TRUE(store_->Read(ids_[i], got.data(), kMiB).ok());
      for (uint64_t b = 0; b < kMiB; b += 4096) {
        ASSERT_EQ(static_cast<uint8_t>(got[b]), value[i])
            << "tensor " << i << " byte " << b;
      }
    }
  }
  uint64_t NvmeRead() const {
    return store_->GetStats().links[static_cast<int>(Link::kNvmeRead)].bytes;
  }

  ::strata::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::vector<TensorId> ids_;
};

TEST_F(PlannedStoreTest, StepsFollowThePlanAndLoseNothing) {
  Open(/*planned=*/true);
  Step();
  SchedulerStats s = store_->GetStats().scheduler;
  ASSERT_GE(s.plans, 1u) << "the first step's shape is planned at its end";
  // The floor: 8 MiB live at every position, 5 MiB above NVMe, so at
  // least the 3 MiB short at the fullest position; more, since the waits
  // that span the turn from forward to backward are not the ones that span
  // the turn to the next step (scheduler/nvme_floor.h).
  EXPECT_GT(s.nvme_read_floor_bytes, 3 * kMiB);
  for (int i = 0; i < 3; ++i) Step();  // the plan is remade after each
  s = store_->GetStats().scheduler;
  const uint64_t planned_read =
      s.planned_link_bytes[static_cast<int>(Link::kNvmeRead)];
  EXPECT_GE(planned_read, s.nvme_read_floor_bytes);
  const uint64_t before = NvmeRead();
  constexpr int kSteps = 4;
  for (int i = 0; i < kSteps; ++i) Step();
  const uint64_t per_step = (NvmeRead() - before) / kSteps;
  // The executor moves what the plan says: a load the plan issued that
  // found no room (a copy still being written back) waits for its acquire
  // and still reads the same bytes.
  EXPECT_EQ(per_step, planned_read);
  // Its loads go out as prefetch jobs (whether one lands before its acquire
  // is timing: the plan starts each as late as the link allows).
  EXPECT_GT(store_->GetStats().prefetch.issued, 0u);
  ExpectCounts(std::vector<uint8_t>(kTensors, 1 + 3 + kSteps));
}

// A step over the last five tensors only is a second shape: it is planned
// too, and steps of both shapes keep every byte.
TEST_F(PlannedStoreTest, AChangedStepIsPlannedAgain) {
  Open(/*planned=*/true);
  Step();
  Step();
  const uint64_t plans = store_->GetStats().scheduler.plans;
  Step(/*first=*/3);
  Step(/*first=*/3);
  EXPECT_GT(store_->GetStats().scheduler.plans, plans);
  Step();
  std::vector<uint8_t> want(kTensors, 3);
  for (int i = 3; i < kTensors; ++i) want[i] = 5;
  ExpectCounts(want);
}

// --timeline: the planned transfers appear on "plan" lanes beside the
// mover's, one NVMe read planned per NVMe read made once the plan runs.
TEST_F(PlannedStoreTest, TheTimelineShowsThePlanBesideTheTransfers) {
  Open(/*planned=*/true, /*timeline=*/true);
  for (int i = 0; i < 6; ++i) Step();
  const std::string path = dir_.path() + "/timeline.json";
  ASSERT_TRUE(store_->WriteTimeline(path).ok());
  const nlohmann::json trace = nlohmann::json::parse(std::ifstream(path));
  std::map<std::string, int> lanes;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") ++lanes[e["cat"].get<std::string>()];
  }
  EXPECT_GT(lanes["plan nvme -> device"] + lanes["plan nvme -> host"], 0);
  EXPECT_GT(lanes["plan device -> nvme"] + lanes["plan host -> nvme"], 0);
  // Every planned NVMe read is made (the first steps, before a plan, make
  // more).
  EXPECT_GE(lanes["nvme -> device"] + lanes["nvme -> host"],
            lanes["plan nvme -> device"] + lanes["plan nvme -> host"]);
}

TEST_F(PlannedStoreTest, TheReactivePathMakesNoPlan) {
  Open(/*planned=*/false);
  for (int i = 0; i < 3; ++i) Step();
  const SchedulerStats s = store_->GetStats().scheduler;
  EXPECT_EQ(s.plans, 0u);
  EXPECT_EQ(s.planned_link_bytes[static_cast<int>(Link::kNvmeRead)], 0u);
  ExpectCounts(std::vector<uint8_t>(kTensors, 3));
}

}  // namespace
}  // namespace strata
