// The store on a real GPU (CudaDevice): odd sizes round-trip through device
// memory by every path, eviction under a small device budget writes dirty
// copies back, and the host arena is registered with CUDA. Skips, saying why,
// where no GPU answers. bench/gpu_check.sh runs it on a lent GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "strata/store.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;

class StoreGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions o = ::strata::testing::SmallStoreOptions(
        dir_.path(), 8 * kMiB, 16 * kMiB, 128 * kMiB);
    o.device.backend = DeviceBackendKind::kCuda;
    o.host.lock_memory = true;
    auto s = Store::Open(o);
    if (!s.ok()) GTEST_SKIP() << "no CUDA device: " << s.status();
    store_ = std::move(*s);
  }
  // Contents of `id` read back through host memory match pattern `seed`.
  void ExpectContents(TensorId id, uint64_t n, uint64_t seed) {
    std::vector<std::byte> out(n);
    ASSERT_TRUE(store_->Read(id, out.data(), n).ok());
    EXPECT_TRUE(MatchesPattern(out.data(), n, seed));
  }

  ::strata::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(StoreGpuTest, OddSizesRoundTripThroughDeviceMemory) {
  EXPECT_THAT(store_->DescribeTiers(),
              ::testing::HasSubstr("registered with CUDA"));
  for (uint64_t n : {uint64_t{1}, uint64_t{511}, uint64_t{4097}, kMiB + 3}) {
    auto id = store_->Create({.name = "odd", .size_bytes = n});
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store_->Write(*id, Pattern(n, n).data(), n).ok());
    ASSERT_TRUE(store_->Evict(*id, Tier::kNvme).ok());
    {  // NVMe -> device through the bounce pipeline; device copy dirty.
      auto lease = store_->Acquire(*id, Tier::kDevice, Access::kWrite);
      ASSERT_TRUE(lease.ok()) << lease.status();
    }
    ASSERT_TRUE(store_->Evict(*id, Tier::kNvme).ok());  // device -> NVMe
    ExpectContents(*id, n, n);                          // NVMe -> host
    {
      auto lease = store_->Acquire(*id, Tier::kDevice, Access::kWrite);
      ASSERT_TRUE(lease.ok()) << lease.status();  // host -> device
    }
    ExpectContents(*id, n, n);  // device -> host
  }
}

TEST_F(StoreGpuTest, EvictionUnderSmallBudgetKeepsEveryTensor) {
  std::vector<TensorId> ids;
  for (int i = 0; i < 12; ++i) {  // 12 x 1 MiB through an 8 MiB device tier
    auto id = store_->Create({.name = "w", .size_bytes = kMiB});
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store_->Write(*id, Pattern(kMiB, 100 + i).data(), kMiB).ok());
    auto lease = store_->Acquire(*id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ids.push_back(*id);
  }
  EXPECT_GT(store_->GetStats().tiers[0].evictions, 0u);
  for (int i = 0; i < 12; ++i) ExpectContents(ids[i], kMiB, 100 + i);
}

// A device-homed tensor has no copy elsewhere: Write() builds the new
// contents beside the old copy (device-to-device copy of the untouched
// bytes, then H2D of the new ones) and swaps it in.
TEST_F(StoreGpuTest, PartialWriteToDeviceHomedTensor) {
  const uint64_t n = 3 * kMiB + 5;
  auto id = store_->Create(
      {.name = "pinned", .size_bytes = n, .home = Tier::kDevice});
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<std::byte> want = Pattern(n, 21);
  ASSERT_TRUE(store_->Write(*id, want.data(), n).ok());
  const std::vector<std::byte> patch = Pattern(4097, 22);
  ASSERT_TRUE(store_->Write(*id, patch.data(), patch.size(), kMiB + 1).ok());
  std::copy(patch.begin(), patch.end(), want.begin() + kMiB + 1);
  std::vector<std::byte> out(n);
  ASSERT_TRUE(store_->Read(*id, out.data(), n).ok());
  EXPECT_TRUE(out == want);
}

// Lease::CopyOut / CopyIn on device memory: ranges of a leased copy cross
// to pinned-or-pageable host memory and back, counted on the links.
TEST_F(StoreGpuTest, LeaseRangeCopiesReachDeviceMemory) {
  const uint64_t n = 2 * kMiB + 9;
  auto id = store_->Create({.name = "ranges", .size_bytes = n});
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<std::byte> want = Pattern(n, 31);
  ASSERT_TRUE(store_->Write(*id, want.data(), n).ok());
  const uint64_t d2h = store_->GetStats().links[int(Link::kD2H)].bytes;
  {
    auto lease = store_->Acquire(*id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    std::vector<std::byte> part(kMiB);
    ASSERT_TRUE(lease->CopyOut(kMiB + 7, part.data(), kMiB).ok());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + kMiB + 7));
    const std::vector<std::byte> patch = Pattern(65536, 32);
    ASSERT_TRUE(lease->CopyIn(4096, patch.data(), patch.size()).ok());
    std::copy(patch.begin(), patch.end(), want.begin() + 4096);
    ASSERT_TRUE(lease->Release().ok());
  }
  EXPECT_EQ(store_->GetStats().links[int(Link::kD2H)].bytes - d2h, kMiB);
  std::vector<std::byte> out(n);
  ASSERT_TRUE(store_->Read(*id, out.data(), n).ok());  // device -> host
  EXPECT_TRUE(out == want);
}

// Compaction on the GPU: device copies split the free device memory; a
// 2 MiB copy then moves one of them with a device-to-device copy (no byte
// crosses the link) and every survivor keeps its bytes.
TEST_F(StoreGpuTest, CompactionMovesADeviceCopyWithinTheGpu) {
  std::vector<TensorId> ids;
  for (int i = 0; i < 8; ++i) {
    auto id = store_->Create({.name = "c", .size_bytes = kMiB});
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store_->Write(*id, Pattern(kMiB, i).data(), kMiB).ok());
    // A write lease: the device copy becomes the only valid one (dirty).
    auto lease = store_->Acquire(*id, Tier::kDevice, Access::kWrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ids.push_back(*id);
  }
  ASSERT_TRUE(store_->Discard(ids[2]).ok());
  ASSERT_TRUE(store_->Discard(ids[5]).ok());
  const Stats before = store_->GetStats();
  auto big = store_->Create({.name = "big", .size_bytes = 2 * kMiB});
  ASSERT_TRUE(big.ok());
  {
    auto lease = store_->Acquire(*big, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  const Stats after = store_->GetStats();
  EXPECT_EQ(after.tiers[0].compactions, before.tiers[0].compactions + 1);
  EXPECT_EQ(after.tiers[0].relocated_bytes,
            before.tiers[0].relocated_bytes + kMiB);
  EXPECT_EQ(after.write_backs, before.write_backs);
  for (int i : {0, 1, 3, 4, 6, 7}) ExpectContents(ids[i], kMiB, i);
}

}  // namespace
}  // namespace strata
