// transformer_determinism_test.cc: the transformer's CPU operations
// (cpu_transformer.h) give the same bits on a pool of one thread, on a pool
// of three, on the shared pool CpuCompute uses, and on every repeat. The
// shapes are just large enough that the three-thread pool really splits
// each job (checked through split_jobs), and small enough for the
// sanitizer builds.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/cpu/cpu_transformer.h"
#include "train/compute/cpu/host_pool.h"

namespace strata::train {
namespace {

using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;
using ::strata::train::testing::SameBits;

// What one run of an operation wrote.
struct Outputs {
  std::vector<std::vector<float>> floats;
  std::vector<double> doubles;
};

// Runs op(pool) on each pool (twice on the three-thread one) and expects
// every run's outputs to hold the same bits, and the three-thread pool to
// have split the work.
template <typename Op>
void ExpectSameBitsOnEveryPool(Op op) {
  HostPool one(1), three(3);
  const Outputs want = op(one);
  const int64_t splits = three.split_jobs();
  const Outputs runs[] = {op(three), op(three), op(HostPool::Shared())};
  EXPECT_GT(three.split_jobs(), splits) << "the job ran on one thread";
  for (const Outputs& got : runs) {
    ASSERT_EQ(got.floats.size(), want.floats.size());
    for (size_t i = 0; i < want.floats.size(); ++i) {
      EXPECT_TRUE(SameBits(got.floats[i], want.floats[i])) << "output " << i;
    }
    EXPECT_EQ(got.doubles, want.doubles);
  }
}

TEST(TransformerDeterminismTest, LayerNorm) {
  const int64_t N = 512, C = 64;
  const auto x = Random(N * C, 1), w = Random(C, 2), b = Random(C, 3);
  const auto dout = Random(N * C, 4);
  ExpectSameBitsOnEveryPool([&](HostPool& pool) {
    std::vector<float> out(N * C), mean(N), rstd(N);
    EXPECT_TRUE(LayerNormForwardCpu(x.data(), w.data(), b.data(), out.data(),
                                    mean.data(), rstd.data(), N, C, pool)
                    .ok());
    std::vector<float> dx = Random(N * C, 5), dw = Random(C, 6),
                       db = Random(C, 7);
    EXPECT_TRUE(LayerNormBackwardCpu(x.data(), w.data(), mean.data(),
                                     rstd.data(), dout.data(), dx.data(),
                                     dw.data(), db.data(), N, C, pool)
                    .ok());
    return Outputs{{out, mean, rstd, dx, dw, db}, {}};
  });
}

TEST(TransformerDeterminismTest, Attention) {
  const int64_t B = 2, T = 48, C = 32, H = 4;
  const auto qkv = Random(B * T * 3 * C, 8, 2.0f);
  const auto dout = Random(B * T * C, 9);
  ExpectSameBitsOnEveryPool([&](HostPool& pool) {
    std::vector<float> out(B * T * C), lse(B * H * T), dqkv(qkv.size());
    EXPECT_TRUE(AttentionForwardCpu(qkv.data(), out.data(), lse.data(), B, T, C,
                                    H, pool)
                    .ok());
    EXPECT_TRUE(AttentionBackwardCpu(qkv.data(), out.data(), dout.data(),
                                     lse.data(), dqkv.data(), B, T, C, H, pool)
                    .ok());
    return Outputs{{out, lse, dqkv}, {}};
  });
}

TEST(TransformerDeterminismTest, Embedding) {
  const int64_t B = 8, T = 256, C = 64, V = 50;
  const auto tokens = RandomLabels(B * T, V, 10);
  const auto wte = Random(V * C, 11), wpe = Random(T * C, 12);
  const auto dout = Random(B * T * C, 13);
  ExpectSameBitsOnEveryPool([&](HostPool& pool) {
    std::vector<float> out(B * T * C);
    EXPECT_TRUE(EmbeddingForwardCpu(tokens.data(), wte.data(), wpe.data(),
                                    out.data(), B, T, C, V, pool)
                    .ok());
    std::vector<float> dwte = Random(V * C, 14), dwpe = Random(T * C, 15);
    EXPECT_TRUE(EmbeddingBackwardCpu(tokens.data(), dout.data(), dwte.data(),
                                     dwpe.data(), B, T, C, V, pool)
                    .ok());
    return Outputs{{out, dwte, dwpe}, {}};
  });
}

TEST(TransformerDeterminismTest, CrossEntropy) {
  const int64_t rows = 256, V = 128;
  const auto logits = Random(rows * V, 16, 4.0f);
  const auto targets = RandomLabels(rows, V, 17);
  ExpectSameBitsOnEveryPool([&](HostPool& pool) {
    std::vector<float> d(rows * V);
    auto loss = CrossEntropyCpu(logits.data(), targets.data(), d.data(), rows,
                                V, 1.0f / rows, pool);
    EXPECT_TRUE(loss.ok());
    return Outputs{{d}, {loss.value_or(0.0)}};
  });
}

TEST(TransformerDeterminismTest, ElementwiseAndSumOfSquares) {
  const int64_t n = 100003;  // blocks of kSumOfSquaresBlock and a tail
  const auto a = Random(n, 18), b = Random(n, 19);
  ExpectSameBitsOnEveryPool([&](HostPool& pool) {
    std::vector<float> sum(n), scaled = a;
    AddCpu(a.data(), b.data(), sum.data(), n, pool);
    ScaleCpuWith(scaled.data(), 0.7f, n, pool);
    return Outputs{{sum, scaled}, {SumOfSquaresCpu(a.data(), n, pool)}};
  });
}

}  // namespace
}  // namespace strata::train
