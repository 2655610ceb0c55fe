// nccl_gpu_test.cc: the NCCL transport (MakeNcclCollectives) on one GPU: one
// rank, since NCCL takes one rank per device. Its all-gather moves device
// memory after the compute stream's work; misuse is refused. Without a
// device, the transport is refused with FailedPrecondition.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "train/collectives.h"

#if defined(STRATA_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace strata::train {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

bool HasDevice() {
#if defined(STRATA_HAVE_CUDA)
  int n = 0;
  const bool found = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return found;
#else
  return false;
#endif
}

TEST(NcclCollectivesTest, WithoutADeviceItIsRefused) {
  if (HasDevice()) GTEST_SKIP() << "a device is here: NcclGpuTest runs";
  std::unique_ptr<Collectives> local = MakeLocalCollectives();
  auto nccl = MakeNcclCollectives(*local, nullptr, 1.0);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(nccl.status().message(),
              AnyOf(HasSubstr("needs a CUDA device"), HasSubstr("without CUDA"),
                    HasSubstr("NCCL is not found")));
}

#if defined(STRATA_HAVE_CUDA)
TEST(NcclGpuTest, OneRanksAllGatherFollowsTheComputeStream) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
            cudaSuccess);
  std::unique_ptr<Collectives> local = MakeLocalCollectives();
  auto nccl = MakeNcclCollectives(*local, compute, 30.0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  Collectives& c = **nccl;
  EXPECT_EQ(c.name(), "nccl");
  EXPECT_EQ(c.size(), 1);
  // 64 MiB written on the compute stream, not waited for: the all-gather
  // must run after it (and a second one after the first).
  const uint64_t bytes = uint64_t{64} << 20;
  char *mine = nullptr, *all = nullptr, *again = nullptr;
  ASSERT_EQ(cudaMalloc(&mine, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&all, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&again, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(mine, 0x3f, bytes, compute), cudaSuccess);
  const std::vector<uint64_t> offsets = {0, bytes};
  auto first = c.StartAllGather(mine, all, offsets, "the all-gather of x");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = c.StartAllGather(all, again, offsets, "the all-gather of y");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(c.Wait(*second).ok());
  EXPECT_TRUE(c.Wait(*first).ok());
  EXPECT_EQ(c.Wait(*first).code(), absl::StatusCode::kNotFound);
  std::vector<char> host(bytes);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), again, bytes, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(std::count(host.begin(), host.end(), 0x3f),
            static_cast<int64_t>(bytes));
  EXPECT_EQ(c.bytes_sent(), 0u);  // no other rank
  // A rank has no peer in a one-rank run; bad offsets are refused.
  EXPECT_EQ(c.StartSend(0, 0, mine, 4, "self").status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<uint64_t> bad = {4, 8};
  EXPECT_EQ(c.StartAllGather(mine, all, bad, "bad").status().code(),
            absl::StatusCode::kInvalidArgument);
  cudaFree(mine);
  cudaFree(all);
  cudaFree(again);
  cudaStreamDestroy(compute);
}
#endif

}  // namespace
}  // namespace strata::train
