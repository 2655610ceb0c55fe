// transformer_gpu_test.cc: CudaCompute's transformer operations against
// CpuCompute on the same random inputs — Add, Scale and the embedding bit for
// bit; LayerNorm, attention, cross-entropy and the sum of squares within
// ~1e-5 (forward) or 1e-4 (backward) of each tensor's size; the GEMM within
// 1e-4 of its error scale — every op giving the same bits when run twice,
// and the InvalidArgument paths. Skips (never passes silently) where
// MakeCudaCompute fails: no GPU, or a build without CUDA.
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/util/compute_gpu_test_util.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/compute.h"

namespace strata::train {
namespace {

using ::strata::train::testing::DeviceArray;
using ::strata::train::testing::ExpectClose;
using ::strata::train::testing::ExpectCloseToMax;
using ::strata::train::testing::Poison;
using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;
using ::strata::train::testing::SameBits;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class TransformerGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = MakeCudaCompute();
    if (!gpu.ok()) GTEST_SKIP() << "no CUDA compute: " << gpu.status();
    gpu_ = std::move(*gpu);
  }

  std::unique_ptr<Compute> cpu_ = MakeCpuCompute();
  std::unique_ptr<Compute> gpu_;
};

// ---- Gemm.

struct GemmCase {
  int64_t m, n, k;
};
constexpr GemmCase kGemmCases[] = {
    {1, 1, 1}, {3, 5, 7}, {33, 17, 129}, {64, 96, 768}, {4, 5, 0}};
// Every stride is its row's width plus this, so a stride mix-up shows.
constexpr int64_t kPad = 3;

// A row-major matrix of `rows` x `cols` stored with stride cols + kPad.
struct Strided {
  int64_t rows, cols;
  std::vector<float> data;
  int64_t ld() const { return cols + kPad; }
};
Strided RandomStrided(int64_t rows, int64_t cols, uint32_t seed) {
  return Strided{rows, cols, Random(rows * (cols + kPad), seed)};
}
// op(x)[i][j] for x stored as op(x) (trans = false) or its transpose.
float OpAt(const Strided& x, bool trans, int64_t i, int64_t j) {
  return trans ? x.data[j * x.ld() + i] : x.data[i * x.ld() + j];
}

// Sum over k of |op(a)[i][k] op(b)[k][j]| + beta |c[i][j]| for each element
// of c (padding too, at 0): the GEMM's rounding error scale.
std::vector<double> GemmScale(const Strided& a, bool ta, const Strided& b,
                              bool tb, const Strided& c, float beta,
                              int64_t k) {
  std::vector<double> scale(c.data.size(), 0.0);
  for (int64_t i = 0; i < c.rows; ++i) {
    for (int64_t j = 0; j < c.cols; ++j) {
      double s = beta == 0.0f ? 0.0 : std::abs(c.data[i * c.ld() + j]);
      for (int64_t p = 0; p < k; ++p) {
        s += std::abs(double{OpAt(a, ta, i, p)} * OpAt(b, tb, p, j));
      }
      scale[i * c.ld() + j] = s;
    }
  }
  return scale;
}

TEST_F(TransformerGpuTest, GemmMatchesCpu) {
  for (const GemmCase& g : kGemmCases) {
    for (int mode = 0; mode < 8; ++mode) {
      const bool ta = mode & 1, tb = mode & 2;
      const float beta = (mode & 4) ? 1.0f : 0.0f;
      SCOPED_TRACE(::testing::Message()
                   << g.m << "x" << g.n << "x" << g.k << " ta=" << ta
                   << " tb=" << tb << " beta=" << beta);
      const Strided a =
          ta ? RandomStrided(g.k, g.m, 1) : RandomStrided(g.m, g.k, 1);
      const Strided b =
          tb ? RandomStrided(g.n, g.k, 2) : RandomStrided(g.k, g.n, 2);
      Strided c = RandomStrided(g.m, g.n, 3);
      if (beta == 0.0f) {  // c may hold NaN; the padding must survive
        for (int64_t i = 0; i < g.m; ++i) {
          for (int64_t j = 0; j < g.n; ++j) c.data[i * c.ld() + j] = NAN;
        }
      }
      auto want = c.data;
      ASSERT_TRUE(cpu_->Gemm(ta, tb, g.m, g.n, g.k, a.data.data(), a.ld(),
                             b.data.data(), b.ld(), beta, want.data(), c.ld())
                      .ok());
      DeviceArray<float> d_a(a.data), d_b(b.data);
      std::vector<float> got[2];
      for (auto& run : got) {
        DeviceArray<float> d_c(c.data);
        ASSERT_TRUE(gpu_->Gemm(ta, tb, g.m, g.n, g.k, d_a.get(), a.ld(),
                               d_b.get(), b.ld(), beta, d_c.get(), c.ld())
                        .ok());
        run = d_c.ToHost();
      }
      EXPECT_TRUE(SameBits(got[0], got[1])) << "not deterministic";
      const auto scale = GemmScale(a, ta, b, tb, c, beta, g.k);
      ExpectClose(got[0], want, 1e-4, 0.0, "c", &scale);
      for (int64_t i = 0; i < g.m; ++i) {
        for (int64_t j = g.n; j < c.ld(); ++j) {
          const int64_t at = i * c.ld() + j;
          ASSERT_EQ(got[0][at], c.data[at]) << "padding written at " << at;
        }
      }
    }
  }
}

TEST_F(TransformerGpuTest, GemmRejectsBadArguments) {
  const int64_t big = int64_t{INT_MAX} + 1;
  struct Bad {
    int64_t m, n, k, lda, ldb, ldc;
    float beta;
  };
  for (const Bad& b : std::vector<Bad>{{big, 1, 1, 1, 1, 1, 0.0f},
                                       {1, 1, -1, 1, 1, 1, 0.0f},
                                       {1, 1, 1, big, 1, 1, 1.0f},
                                       {2, 2, 2, 2, 2, 2, 0.5f},
                                       {2, 2, 2, 2, 2, 2, -1.0f},
                                       {2, 2, 2, 1, 2, 2, 0.0f}}) {
    SCOPED_TRACE(::testing::Message()
                 << b.m << " " << b.k << " " << b.lda << " beta=" << b.beta);
    EXPECT_EQ(gpu_->Gemm(false, false, b.m, b.n, b.k, nullptr, b.lda, nullptr,
                         b.ldb, b.beta, nullptr, b.ldc)
                  .code(),
              kInvalid);
  }
}

// ---- LayerNorm.

struct RowsCase {
  int64_t N, C;
};
constexpr RowsCase kLayerNormCases[] = {
    {1, 1}, {3, 7}, {64, 768}, {5, 1000}, {300, 33}};

// x random around an offset, so the mean matters.
std::vector<float> LayerNormInput(int64_t n, uint32_t seed) {
  auto x = Random(n, seed, 2.0f);
  for (float& v : x) v += 3.0f;
  return x;
}

TEST_F(TransformerGpuTest, LayerNormForwardMatchesCpu) {
  for (const RowsCase& s : kLayerNormCases) {
    SCOPED_TRACE(::testing::Message() << s.N << "x" << s.C);
    const auto x = LayerNormInput(s.N * s.C, 4);
    const auto w = Random(s.C, 5), b = Random(s.C, 6);
    auto want = Poison(s.N * s.C), want_mean = Poison(s.N),
         want_rstd = Poison(s.N);
    ASSERT_TRUE(cpu_->LayerNormForward(x.data(), w.data(), b.data(),
                                       want.data(), want_mean.data(),
                                       want_rstd.data(), s.N, s.C)
                    .ok());
    DeviceArray<float> d_x(x), d_w(w), d_b(b);
    std::vector<float> out[2], mean[2], rstd[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_out(Poison(s.N * s.C)), d_mean(Poison(s.N)),
          d_rstd(Poison(s.N));
      ASSERT_TRUE(gpu_->LayerNormForward(d_x.get(), d_w.get(), d_b.get(),
                                         d_out.get(), d_mean.get(),
                                         d_rstd.get(), s.N, s.C)
                      .ok());
      out[r] = d_out.ToHost();
      mean[r] = d_mean.ToHost();
      rstd[r] = d_rstd.ToHost();
    }
    EXPECT_TRUE(SameBits(out[0], out[1]) && SameBits(mean[0], mean[1]) &&
                SameBits(rstd[0], rstd[1]))
        << "not deterministic";
    ExpectClose(mean[0], want_mean, 1e-5, 0.0, "mean");
    ExpectClose(rstd[0], want_rstd, 1e-5, 0.0, "rstd");
    ExpectCloseToMax(out[0], want, 1e-5, "out");
  }
}

TEST_F(TransformerGpuTest, LayerNormBackwardMatchesCpu) {
  for (const RowsCase& s : kLayerNormCases) {
    SCOPED_TRACE(::testing::Message() << s.N << "x" << s.C);
    const auto x = LayerNormInput(s.N * s.C, 7);
    const auto w = Random(s.C, 8), b = Random(s.C, 9);
    const auto dout = Random(s.N * s.C, 10);
    // The CPU's saved statistics feed both, so only the backward differs.
    std::vector<float> out(s.N * s.C), mean(s.N), rstd(s.N);
    ASSERT_TRUE(cpu_->LayerNormForward(x.data(), w.data(), b.data(), out.data(),
                                       mean.data(), rstd.data(), s.N, s.C)
                    .ok());
    // Gradients accumulate: start from what a caller already holds.
    const auto dx0 = Random(s.N * s.C, 11), dw0 = Random(s.C, 12),
               db0 = Random(s.C, 13);
    auto want_dx = dx0, want_dw = dw0, want_db = db0;
    ASSERT_TRUE(cpu_->LayerNormBackward(x.data(), w.data(), mean.data(),
                                        rstd.data(), dout.data(),
                                        want_dx.data(), want_dw.data(),
                                        want_db.data(), s.N, s.C)
                    .ok());
    DeviceArray<float> d_x(x), d_w(w), d_mean(mean), d_rstd(rstd), d_dout(dout);
    std::vector<float> dx[2], dw[2], db[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_dx(dx0), d_dw(dw0), d_db(db0);
      ASSERT_TRUE(gpu_->LayerNormBackward(d_x.get(), d_w.get(), d_mean.get(),
                                          d_rstd.get(), d_dout.get(),
                                          d_dx.get(), d_dw.get(), d_db.get(),
                                          s.N, s.C)
                      .ok());
      dx[r] = d_dx.ToHost();
      dw[r] = d_dw.ToHost();
      db[r] = d_db.ToHost();
    }
    EXPECT_TRUE(SameBits(dx[0], dx[1]) && SameBits(dw[0], dw[1]) &&
                SameBits(db[0], db[1]))
        << "not deterministic";
    ExpectCloseToMax(dx[0], want_dx, 1e-4, "dx");
    ExpectCloseToMax(dw[0], want_dw, 1e-4, "dweight");
    ExpectCloseToMax(db[0], want_db, 1e-4, "dbias");
  }
}

// ---- Attention.

struct AttentionCase {
  int64_t B, T, C, H;
  float scale;  // of the random qkv: larger means peakier softmaxes
};
constexpr AttentionCase kAttentionCases[] = {
    {1, 1, 4, 1, 1.0f},     // one key
    {2, 5, 8, 2, 1.0f},     // head width 4
    {2, 64, 128, 2, 1.0f},  // GPT-2's head width, 64
    {1, 17, 384, 2, 1.0f},  // 192 wide: two passes over the keys
    {1, 9, 3, 3, 1.0f},     // head width 1
    {2, 33, 96, 3, 3.0f},   // one lane per dimension, sharp maxima
};

// The [rows x C] slice `part` (0 q, 1 k, 2 v) of a [rows x 3C] tensor.
std::vector<float> Part(const std::vector<float>& qkv, int64_t rows, int64_t C,
                        int part) {
  std::vector<float> out(rows * C);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      out[r * C + c] = qkv[r * 3 * C + part * C + c];
    }
  }
  return out;
}

TEST_F(TransformerGpuTest, AttentionForwardMatchesCpu) {
  for (const AttentionCase& s : kAttentionCases) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T
                                      << " C=" << s.C << " H=" << s.H);
    const auto qkv = Random(s.B * s.T * 3 * s.C, 14, s.scale);
    auto want = Poison(s.B * s.T * s.C), want_lse = Poison(s.B * s.H * s.T);
    ASSERT_TRUE(cpu_->AttentionForward(qkv.data(), want.data(), want_lse.data(),
                                       s.B, s.T, s.C, s.H)
                    .ok());
    DeviceArray<float> d_qkv(qkv);
    std::vector<float> out[2], lse[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_out(Poison(s.B * s.T * s.C)),
          d_lse(Poison(s.B * s.H * s.T));
      ASSERT_TRUE(gpu_->AttentionForward(d_qkv.get(), d_out.get(), d_lse.get(),
                                         s.B, s.T, s.C, s.H)
                      .ok());
      out[r] = d_out.ToHost();
      lse[r] = d_lse.ToHost();
    }
    EXPECT_TRUE(SameBits(out[0], out[1]) && SameBits(lse[0], lse[1]))
        << "not deterministic";
    ExpectCloseToMax(out[0], want, 1e-5, "out");
    ExpectCloseToMax(lse[0], want_lse, 1e-5, "lse");
  }
}

TEST_F(TransformerGpuTest, AttentionBackwardMatchesCpu) {
  for (const AttentionCase& s : kAttentionCases) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T
                                      << " C=" << s.C << " H=" << s.H);
    const int64_t rows = s.B * s.T;
    const auto qkv = Random(rows * 3 * s.C, 15, s.scale);
    const auto dout = Random(rows * s.C, 16);
    // The CPU's forward feeds both, so only the backward differs.
    std::vector<float> out(rows * s.C), lse(s.B * s.H * s.T);
    ASSERT_TRUE(cpu_->AttentionForward(qkv.data(), out.data(), lse.data(), s.B,
                                       s.T, s.C, s.H)
                    .ok());
    auto want = Poison(rows * 3 * s.C);
    ASSERT_TRUE(cpu_->AttentionBackward(qkv.data(), out.data(), dout.data(),
                                        lse.data(), want.data(), s.B, s.T, s.C,
                                        s.H)
                    .ok());
    DeviceArray<float> d_qkv(qkv), d_out(out), d_dout(dout), d_lse(lse);
    std::vector<float> got[2];
    for (auto& run : got) {
      DeviceArray<float> d_dqkv(Poison(rows * 3 * s.C));  // overwritten
      ASSERT_TRUE(gpu_->AttentionBackward(d_qkv.get(), d_out.get(),
                                          d_dout.get(), d_lse.get(),
                                          d_dqkv.get(), s.B, s.T, s.C, s.H)
                      .ok());
      run = d_dqkv.ToHost();
    }
    EXPECT_TRUE(SameBits(got[0], got[1])) << "not deterministic";
    const char* names[] = {"dq", "dk", "dv"};
    for (int part = 0; part < 3; ++part) {
      ExpectCloseToMax(Part(got[0], rows, s.C, part),
                       Part(want, rows, s.C, part), 1e-4, names[part]);
    }
  }
}

TEST_F(TransformerGpuTest, AttentionNeedsHeadsDividingC) {
  for (int64_t H : {int64_t{0}, int64_t{-1}, int64_t{3}}) {
    SCOPED_TRACE(::testing::Message() << "H=" << H);
    EXPECT_EQ(
        gpu_->AttentionForward(nullptr, nullptr, nullptr, 1, 2, 8, H).code(),
        kInvalid);
    EXPECT_EQ(gpu_->AttentionBackward(nullptr, nullptr, nullptr, nullptr,
                                      nullptr, 1, 2, 8, H)
                  .code(),
              kInvalid);
  }
}

// ---- Embedding.

struct EmbeddingCase {
  int64_t B, T, C, V, positions;  // positions: wpe's rows, >= T
};
constexpr EmbeddingCase kEmbeddingCases[] = {
    {2, 5, 7, 11, 8}, {4, 64, 768, 50, 64}, {1, 3, 1, 2, 3}};

TEST_F(TransformerGpuTest, EmbeddingForwardMatchesCpuBitwise) {
  for (const EmbeddingCase& s : kEmbeddingCases) {
    SCOPED_TRACE(::testing::Message() << s.B << "x" << s.T << "x" << s.C);
    const auto tokens = RandomLabels(s.B * s.T, s.V, 17);
    const auto wte = Random(s.V * s.C, 18), wpe = Random(s.positions * s.C, 19);
    auto want = Poison(s.B * s.T * s.C);
    ASSERT_TRUE(cpu_->EmbeddingForward(tokens.data(), wte.data(), wpe.data(),
                                       want.data(), s.B, s.T, s.C, s.V)
                    .ok());
    DeviceArray<int32_t> d_tokens(tokens);
    DeviceArray<float> d_wte(wte), d_wpe(wpe), d_out(Poison(s.B * s.T * s.C));
    ASSERT_TRUE(gpu_->EmbeddingForward(d_tokens.get(), d_wte.get(), d_wpe.get(),
                                       d_out.get(), s.B, s.T, s.C, s.V)
                    .ok());
    EXPECT_TRUE(SameBits(d_out.ToHost(), want));
  }
}

TEST_F(TransformerGpuTest, EmbeddingBackwardMatchesCpuBitwise) {
  for (const EmbeddingCase& s : kEmbeddingCases) {
    SCOPED_TRACE(::testing::Message() << s.B << "x" << s.T << "x" << s.C);
    // Few distinct tokens, so most repeat and their sums' order matters.
    const auto tokens = RandomLabels(s.B * s.T, s.V, 20);
    const auto dout = Random(s.B * s.T * s.C, 21);
    const auto dwte0 = Random(s.V * s.C, 22);
    const auto dwpe0 = Random(s.positions * s.C, 23);
    auto want_wte = dwte0, want_wpe = dwpe0;
    ASSERT_TRUE(cpu_->EmbeddingBackward(tokens.data(), dout.data(),
                                        want_wte.data(), want_wpe.data(), s.B,
                                        s.T, s.C, s.V)
                    .ok());
    DeviceArray<int32_t> d_tokens(tokens);
    DeviceArray<float> d_dout(dout);
    std::vector<float> wte[2], wpe[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_wte(dwte0), d_wpe(dwpe0);
      ASSERT_TRUE(gpu_->EmbeddingBackward(d_tokens.get(), d_dout.get(),
                                          d_wte.get(), d_wpe.get(), s.B, s.T,
                                          s.C, s.V)
                      .ok());
      wte[r] = d_wte.ToHost();
      wpe[r] = d_wpe.ToHost();
    }
    EXPECT_TRUE(SameBits(wte[0], wte[1]) && SameBits(wpe[0], wpe[1]))
        << "not deterministic";
    // Both add in the contract's order, one rounding per term.
    EXPECT_TRUE(SameBits(wte[0], want_wte)) << "dwte differs from the CPU's";
    EXPECT_TRUE(SameBits(wpe[0], want_wpe)) << "dwpe differs from the CPU's";
  }
}

// ---- Cross-entropy.

TEST_F(TransformerGpuTest, CrossEntropyMatchesCpu) {
  for (const auto& [rows, V] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 7}, {64, 50304}, {300, 1000}, {5, 300}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << V);
    const auto logits = Random(rows * V, 24, 8.0f);
    const auto targets = RandomLabels(rows, V, 25);
    // A slice of a batch four times as many tokens.
    const float grad_scale = 1.0f / static_cast<float>(4 * rows);
    auto want_d = Poison(rows * V);
    auto want = cpu_->CrossEntropy(logits.data(), targets.data(), want_d.data(),
                                   rows, V, grad_scale);
    ASSERT_TRUE(want.ok()) << want.status();
    DeviceArray<float> d_logits(logits);
    DeviceArray<int32_t> d_targets(targets);
    double loss[2];
    std::vector<float> d[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_d(Poison(rows * V));
      auto got = gpu_->CrossEntropy(d_logits.get(), d_targets.get(), d_d.get(),
                                    rows, V, grad_scale);
      ASSERT_TRUE(got.ok()) << got.status();
      loss[r] = *got;
      d[r] = d_d.ToHost();
    }
    EXPECT_EQ(loss[0], loss[1]) << "not deterministic";
    EXPECT_TRUE(SameBits(d[0], d[1])) << "not deterministic";
    EXPECT_NEAR(loss[0], *want, 1e-5 * std::abs(*want) + 1e-6);
    // softmax - onehot cancels near p = 1. p inherits the relative error of
    // the row's float sum of exps, ~sqrt(V) ulp for a loop over V terms.
    const double rtol = V > 10000 ? 1e-4 : 1e-5;
    ExpectClose(d[0], want_d, rtol, 1e-6 * grad_scale, "dlogits");

    auto no_grad = gpu_->CrossEntropy(d_logits.get(), d_targets.get(), nullptr,
                                      rows, V, grad_scale);
    ASSERT_TRUE(no_grad.ok()) << no_grad.status();
    EXPECT_EQ(*no_grad, loss[0]);
    DeviceArray<float> in_place(logits);
    auto same = gpu_->CrossEntropy(in_place.get(), d_targets.get(),
                                   in_place.get(), rows, V, grad_scale);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(*same, loss[0]);
    EXPECT_TRUE(SameBits(in_place.ToHost(), d[0])) << "in place differs";
  }
}

TEST_F(TransformerGpuTest, CrossEntropyBadTargetWritesNothing) {
  const int64_t rows = 300, V = 4;
  const auto logits = Random(rows * V, 26);
  const std::vector<float> sentinel(rows * V, 7.0f);
  for (int32_t bad : {-1, 4}) {
    SCOPED_TRACE(::testing::Message() << "target " << bad);
    auto targets = RandomLabels(rows, V, 27);
    targets[200] = bad;
    DeviceArray<int32_t> d_targets(targets);
    DeviceArray<float> d_logits(logits), d_d(sentinel);
    EXPECT_EQ(gpu_->CrossEntropy(d_logits.get(), d_targets.get(), d_d.get(),
                                 rows, V, 1.0f)
                  .status()
                  .code(),
              kInvalid);
    EXPECT_TRUE(SameBits(d_d.ToHost(), sentinel)) << "dlogits written";
    EXPECT_EQ(gpu_->CrossEntropy(d_logits.get(), d_targets.get(),
                                 d_logits.get(), rows, V, 1.0f)
                  .status()
                  .code(),
              kInvalid);
    EXPECT_TRUE(SameBits(d_logits.ToHost(), logits)) << "logits written";
  }
  // The error leaves nothing behind: good targets still work.
  DeviceArray<int32_t> good(RandomLabels(rows, V, 28));
  DeviceArray<float> d_logits(logits);
  EXPECT_TRUE(
      gpu_->CrossEntropy(d_logits.get(), good.get(), nullptr, rows, V, 1.0f)
          .ok());
}

// ---- Add, Scale, SumOfSquares.

TEST_F(TransformerGpuTest, AddAndScaleMatchCpuBitwise) {
  const int64_t n = (int64_t{1} << 20) + 7;
  const auto a = Random(n, 29), b = Random(n, 30);
  auto want_sum = Poison(n);
  ASSERT_TRUE(cpu_->Add(a.data(), b.data(), want_sum.data(), n).ok());
  DeviceArray<float> d_a(a), d_b(b), d_sum(Poison(n)), d_acc(a);
  ASSERT_TRUE(gpu_->Add(d_a.get(), d_b.get(), d_sum.get(), n).ok());
  EXPECT_TRUE(SameBits(d_sum.ToHost(), want_sum));
  // In place, as the residual stream accumulates.
  ASSERT_TRUE(gpu_->Add(d_acc.get(), d_b.get(), d_acc.get(), n).ok());
  EXPECT_TRUE(SameBits(d_acc.ToHost(), want_sum));

  auto want_scaled = a;
  ScaleCpu(want_scaled.data(), 0.37f, n);
  DeviceArray<float> d_x(a);
  ASSERT_TRUE(gpu_->Scale(d_x.get(), 0.37f, n).ok());
  EXPECT_TRUE(SameBits(d_x.ToHost(), want_scaled));
}

TEST_F(TransformerGpuTest, SumOfSquaresMatchesCpu) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 22) + 5}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    const auto x = Random(n, 31);
    double reference = 0.0;  // each square is exact in double
    for (float v : x) reference += double{v} * v;
    auto want = cpu_->SumOfSquares(x.data(), n);
    ASSERT_TRUE(want.ok()) << want.status();
    DeviceArray<float> d_x(x);
    auto got = gpu_->SumOfSquares(d_x.get(), n);
    auto again = gpu_->SumOfSquares(d_x.get(), n);
    ASSERT_TRUE(got.ok() && again.ok()) << got.status() << again.status();
    EXPECT_EQ(*got, *again) << "not deterministic";
    // Summation orders differ: a double loop over 4M terms is good to ~1e-13.
    EXPECT_NEAR(*got, reference, 1e-10 * reference);
    EXPECT_NEAR(*got, *want, 1e-10 * reference);
  }
  auto empty = gpu_->SumOfSquares(nullptr, 0);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, 0.0);
}

}  // namespace
}  // namespace strata::train
