// Unified-memory mode on a real GPU: the store's prefetch hints, evictions
// and discards go through the CUDA 13 calls, and the device sees (and
// writes) the same bytes the host does at the same pointer. Skips, saying
// why, where no GPU answers. bench/gpu_check.sh runs it on a lent GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <vector>

#include "strata/store.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;

class UnifiedGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef STRATA_HAVE_CUDA
    GTEST_SKIP() << "strata was built without CUDA";
#else
    StoreOptions o = ::strata::testing::SmallStoreOptions(
        dir_.path(), 4 * kMiB, 16 * kMiB, 128 * kMiB);
    o.device.backend = DeviceBackendKind::kCuda;
    o.device.memory = DeviceMemory::kUnified;
    auto s = Store::Open(o);
    if (!s.ok()) GTEST_SKIP() << "no CUDA device: " << s.status();
    store_ = std::move(*s);
#endif
  }

  TensorId Make(uint64_t n, uint64_t seed) {
    auto id = store_->Create({.name = "um", .size_bytes = n});
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(store_->Write(*id, Pattern(n, seed).data(), n).ok());
    return *id;
  }

  // What the device reads at a device lease's pointer (a D2H cudaMemcpy).
  std::vector<std::byte> DeviceView(TensorId id, uint64_t n) {
    std::vector<std::byte> out(n);
#ifdef STRATA_HAVE_CUDA
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kRead);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok()) return out;
    EXPECT_EQ(cudaMemcpy(out.data(), lease->data(), n, cudaMemcpyDefault),
              cudaSuccess);
    EXPECT_TRUE(lease->Release().ok());
#endif
    return out;
  }

  ::strata::testing::TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(UnifiedGpuTest, PrefetchedBytesAreWhatTheDeviceReads) {
  EXPECT_THAT(store_->DescribeTiers(), ::testing::HasSubstr("managed memory"));
  for (uint64_t n : {uint64_t{1}, uint64_t{4097}, kMiB + 3}) {
    const TensorId id = Make(n, n);
    EXPECT_TRUE(MatchesPattern(DeviceView(id, n).data(), n, n));
    std::vector<std::byte> back(n);
    ASSERT_TRUE(store_->Read(id, back.data(), n).ok());
    EXPECT_TRUE(MatchesPattern(back.data(), n, n));
  }
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.unified.prefetches, 3u);
  EXPECT_GT(stats.links[static_cast<int>(Link::kH2D)].bytes, kMiB);
}

TEST_F(UnifiedGpuTest, EvictionUnderASmallDeviceBudgetKeepsEveryTensor) {
  std::vector<TensorId> ids;
  for (uint64_t i = 0; i < 6; ++i) ids.push_back(Make(kMiB, 100 + i));
  for (uint64_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(DeviceView(ids[i], kMiB).data(), kMiB, 100 + i));
  }
  EXPECT_GT(store_->GetStats().unified.evictions, 0u);
  for (uint64_t i = 0; i < ids.size(); ++i) {
    std::vector<std::byte> back(kMiB);
    ASSERT_TRUE(store_->Read(ids[i], back.data(), kMiB).ok());
    EXPECT_TRUE(MatchesPattern(back.data(), kMiB, 100 + i));
  }
}

TEST_F(UnifiedGpuTest, DeviceWritesThroughAnOverwriteLeaseReachTheHost) {
#ifdef STRATA_HAVE_CUDA
  const uint64_t n = 2 * kMiB + 5;
  const TensorId id = Make(n, 7);
  {
    auto lease = store_->Acquire(id, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_EQ(cudaMemset(lease->data(), 0xab, n), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_TRUE(lease->Release().ok());
  }
  EXPECT_EQ(store_->GetStats().unified.discards, 1u);
  ASSERT_TRUE(store_->Evict(id, Tier::kNvme).ok());  // through bounce chunks
  std::vector<std::byte> back(n);
  ASSERT_TRUE(store_->Read(id, back.data(), n).ok());
  EXPECT_EQ(back.front(), std::byte{0xab});
  EXPECT_EQ(back.back(), std::byte{0xab});
  ASSERT_TRUE(store_->Discard(id).ok());
#endif
}

}  // namespace
}  // namespace strata
