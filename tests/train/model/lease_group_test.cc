// lease_group_test.cc: LeaseGroup takes its leases all or nothing, and gets
// past a tier fragmented by its own first leases by evicting and retrying.
#include "train/model/lease_group.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/test_util.h"

namespace strata::train {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;

constexpr uint64_t kK = 1024;

class LeaseGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o = SmallStoreOptions(dir_.path(), 256 * kK, 2 * kMiB, 0);
    o.nvme.directories.clear();
    o.nvme.budget_bytes = 0;
    o.scheduler.prefetch = false;  // a layout the test controls
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(o);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = *std::move(s);
  }
  TensorId Make(uint64_t bytes, uint64_t seed) {
    absl::StatusOr<TensorId> id =
        store_->Create({.size_bytes = bytes, .home = Tier::kHost});
    EXPECT_TRUE(id.ok()) << id.status();
    std::vector<std::byte> data(bytes);
    FillPattern(data.data(), bytes, seed);
    EXPECT_TRUE(store_->Write(*id, data.data(), bytes).ok());
    return *id;
  }
  // Leaves a small unleased copy in the middle of the device tier.
  void SplitDeviceTier() {
    const TensorId big = Make(100 * kK, 1), small = Make(16 * kK, 2);
    for (TensorId id : {big, small}) {
      absl::StatusOr<Lease> l =
          store_->Acquire(id, Tier::kDevice, Access::kRead);
      ASSERT_TRUE(l.ok()) << l.status();
    }
    // Both leases are released at the end of the loop body, in order: big
    // at [0, 100K), small at [100K, 116K). Now free the bottom.
    ASSERT_TRUE(store_->Evict(big, Tier::kHost).ok());
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(LeaseGroupTest, RetriesPastFragmentationItCausedItself) {
  SplitDeviceTier();
  // Three 80 KiB tensors fit the 256 KiB tier only if they pack: the first
  // lands below the small copy, the second above it, and the third finds no
  // 80 KiB range even after the small copy is evicted.
  const TensorId w[3] = {Make(80 * kK, 10), Make(80 * kK, 11),
                         Make(80 * kK, 12)};
  const uint64_t retries = LeaseGroup::retries();
  LeaseGroup group(store_.get(), Tier::kDevice, nullptr);
  int index[3];
  for (int i = 0; i < 3; ++i) index[i] = group.Add(w[i], Access::kRead);
  ASSERT_TRUE(group.Acquire().ok());
  EXPECT_EQ(LeaseGroup::retries(), retries + 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(MatchesPattern(group.data(index[i]), 80 * kK, 10 + i)) << i;
  }
  ASSERT_TRUE(group.Release().ok());
  for (TensorId id : w) EXPECT_EQ(store_->GetResidency(id)->leases, 0);
}

TEST_F(LeaseGroupTest, HoldsNothingWhenTheGroupCannotFit) {
  const TensorId a = Make(100 * kK, 1), b = Make(100 * kK, 2),
                 c = Make(100 * kK, 3);
  LeaseGroup group(store_.get(), Tier::kDevice, nullptr);
  group.Add(a, Access::kRead);
  group.Add(b, Access::kWrite);
  group.Add(c, Access::kOverwrite);
  const absl::Status status = group.Acquire();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  for (TensorId id : {a, b, c}) {
    EXPECT_EQ(store_->GetResidency(id)->leases, 0);
  }
  // The contents are intact: a failed group changes nothing.
  std::vector<std::byte> back(100 * kK);
  ASSERT_TRUE(store_->Read(b, back.data(), back.size()).ok());
  EXPECT_TRUE(MatchesPattern(back.data(), back.size(), 2));
}

TEST_F(LeaseGroupTest, LargestFirstNeedsNoRetryWhenSizesDiffer) {
  SplitDeviceTier();
  const TensorId big = Make(200 * kK, 20), small = Make(40 * kK, 21);
  const uint64_t retries = LeaseGroup::retries();
  LeaseGroup group(store_.get(), Tier::kDevice, nullptr);
  const int s = group.Add(small, Access::kRead);
  const int b = group.Add(big, Access::kRead);
  ASSERT_TRUE(group.Acquire().ok());
  EXPECT_EQ(LeaseGroup::retries(), retries);
  EXPECT_TRUE(MatchesPattern(group.data(s), 40 * kK, 21));
  EXPECT_TRUE(MatchesPattern(group.data(b), 200 * kK, 20));
}

}  // namespace
}  // namespace strata::train
