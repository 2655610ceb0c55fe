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

#include "tests/util/gpt_test_util.h"
#include "train/comm/collectives.h"

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
  auto nccl = MakeNcclCollectives(*local, 1.0);
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
  auto nccl = MakeNcclCollectives(*local, 30.0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  Collectives& c = **nccl;
  c.OrderAfter(compute);
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

// Host memory (a value, a host-leased shard) is staged through GPU memory.
TEST(NcclGpuTest, HostBuffersAreStaged) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  std::unique_ptr<Collectives> local = MakeLocalCollectives();
  auto nccl = MakeNcclCollectives(*local, 30.0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  struct Part {
    double sum;
    int64_t count;
  };
  auto all = AllGatherValue(**nccl, Part{2.5, 7}, "the all-gather of a part");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].sum, 2.5);
  EXPECT_EQ((*all)[0].count, 7);
}

// The sharded GPT's GPU path (its shards' gathers over NCCL, the last
// rank's own shard copied out of device memory) on one rank: bit for bit
// the unsharded model on the same GPU. One GPU holds one NCCL rank, so the
// chain between ranks is not reached here (the CPU transports test it).
TEST(NcclGpuTest, OneShardedRankOverNcclIsTheUnshardedGptBitwise) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  GptConfig c = testing::Micro();
  c.grad_clip = 0.05f;  // the roll-back path too
  const testing::TrainRun one =
      testing::Train(testing::Where::kOffloaded, c, 4, nullptr, true);
  std::unique_ptr<Collectives> local = MakeLocalCollectives();
  auto nccl = MakeNcclCollectives(*local, 60.0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  const testing::TrainRun sharded =
      testing::Train(testing::Where::kOffloaded, c, 4, nccl->get(), true);
  ASSERT_EQ(one.losses.size(), 4u);
  EXPECT_EQ(sharded.losses, one.losses);
  EXPECT_EQ(sharded.wte, one.wte);
  EXPECT_EQ(sharded.qkv, one.qkv);
  EXPECT_EQ((*nccl)->bytes_sent(), 0u);  // no peer to send to
  EXPECT_GT(one.clip.clipped, 0);
}
#endif

}  // namespace
}  // namespace strata::train
