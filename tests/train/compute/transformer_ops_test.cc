// transformer_ops_test.cc: the transformer's CPU operations (compute.h's Gemm
// .. SumOfSquares, cpu_transformer.h) against naive double-precision
// references on random data (attention against one that materialises the
// T x T scores), their "+=" and overwrite semantics, and their errors, each
// of which must leave the outputs untouched. Gradients are checked in
// transformer_grad_test.cc, bits across thread counts in
// transformer_determinism_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/cpu_transformer.h"

namespace strata::train {
namespace {

using ::strata::train::testing::ExpectNearReference;
using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;
using ::strata::train::testing::SameBits;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class TransformerOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Compute> compute_ = MakeCpuCompute();
};

// ---- Gemm.

struct GemmCase {
  bool ta, tb;
  int64_t m, n, k;
};

// op(a) op(b) in double, with a and b stored as Gemm reads them.
std::vector<double> NaiveGemm(const GemmCase& g, const std::vector<float>& a,
                              int64_t lda, const std::vector<float>& b,
                              int64_t ldb) {
  std::vector<double> c(g.m * g.n, 0.0);
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      for (int64_t p = 0; p < g.k; ++p) {
        const double x = g.ta ? a[p * lda + i] : a[i * lda + p];
        const double y = g.tb ? b[j * ldb + p] : b[p * ldb + j];
        c[i * g.n + j] += x * y;
      }
    }
  }
  return c;
}

// Gemm over padded strides, beta 0 into NaN and beta 1 onto known values;
// the padding columns of c keep their bits.
void CheckGemm(Compute& compute, const GemmCase& g) {
  const int64_t lda = (g.ta ? g.m : g.k) + 2, ldb = (g.tb ? g.k : g.n) + 3;
  const int64_t ldc = g.n + 1;
  const auto a = Random((g.ta ? g.k : g.m) * lda, 1);
  const auto b = Random((g.tb ? g.n : g.k) * ldb, 2);
  const std::vector<double> want = NaiveGemm(g, a, lda, b, ldb);
  std::vector<float> c(g.m * ldc, kNaN);
  ASSERT_TRUE(compute
                  .Gemm(g.ta, g.tb, g.m, g.n, g.k, a.data(), lda, b.data(), ldb,
                        0.0f, c.data(), ldc)
                  .ok());
  const auto prior = Random(g.m * ldc, 3);
  std::vector<float> acc = prior;
  ASSERT_TRUE(compute
                  .Gemm(g.ta, g.tb, g.m, g.n, g.k, a.data(), lda, b.data(), ldb,
                        1.0f, acc.data(), ldc)
                  .ok());
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t at = i * ldc + j;
      if (j == g.n) {
        EXPECT_TRUE(std::isnan(c[at]));  // padding: untouched
        EXPECT_EQ(acc[at], prior[at]);
        continue;
      }
      const double w = want[i * g.n + j];
      EXPECT_NEAR(c[at], w, 1e-5 * std::abs(w) + 1e-5) << i << "," << j;
      EXPECT_NEAR(acc[at], w + prior[at], 1e-5 * std::abs(w) + 1e-5);
    }
  }
}

TEST_F(TransformerOpsTest, GemmMatchesDoubleForEveryTranspose) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb);
      CheckGemm(*compute_, {ta, tb, 5, 7, 3});
      CheckGemm(*compute_, {ta, tb, 17, 4, 33});
    }
  }
}

TEST_F(TransformerOpsTest, GemmWithEmptyInnerDimensionZeroesOrKeeps) {
  std::vector<float> c(6, kNaN);
  ASSERT_TRUE(compute_
                  ->Gemm(false, false, 2, 3, 0, nullptr, 0, nullptr, 3, 0.0f,
                         c.data(), 3)
                  .ok());
  EXPECT_TRUE(SameBits(c, std::vector<float>(6, 0.0f)));
  const auto prior = Random(6, 4);
  c = prior;
  ASSERT_TRUE(compute_
                  ->Gemm(false, false, 2, 3, 0, nullptr, 0, nullptr, 3, 1.0f,
                         c.data(), 3)
                  .ok());
  EXPECT_TRUE(SameBits(c, prior));
}

TEST_F(TransformerOpsTest, GemmRejectsBadBetaAndDimensionsUntouched) {
  const auto a = Random(6, 5), b = Random(6, 6);
  const auto prior = Random(4, 7);
  std::vector<float> c = prior;
  struct Bad {
    int64_t m, n, k, lda, ldb, ldc;
    float beta;
  };
  const int64_t big = int64_t{1} << 31;
  for (const Bad& bad : {Bad{2, 2, 3, 3, 2, 2, 0.5f},
                         {2, 2, 3, 3, 2, 2, kNaN},
                         {2, 2, 3, 3, 2, 2, -1.0f},
                         {-1, 2, 3, 3, 2, 2, 0.0f},
                         {big, 2, 3, 3, 2, 2, 0.0f},
                         {2, 2, 3, 3, big, 2, 0.0f},
                         {2, 2, 3, 2, 2, 2, 0.0f},
                         {2, 2, 3, 3, 1, 2, 0.0f},
                         {2, 2, 3, 3, 2, 1, 0.0f}}) {
    const absl::Status s =
        compute_->Gemm(false, false, bad.m, bad.n, bad.k, a.data(), bad.lda,
                       b.data(), bad.ldb, bad.beta, c.data(), bad.ldc);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_TRUE(SameBits(c, prior));
}

// ---- LayerNorm.

struct LayerNormRef {
  std::vector<double> out, mean, rstd;
};

LayerNormRef NaiveLayerNorm(const std::vector<float>& x,
                            const std::vector<float>& w,
                            const std::vector<float>& b, int64_t N, int64_t C) {
  LayerNormRef r{std::vector<double>(N * C), std::vector<double>(N),
                 std::vector<double>(N)};
  for (int64_t i = 0; i < N; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; ++j) m += x[i * C + j];
    m /= C;
    for (int64_t j = 0; j < C; ++j)
      v += (x[i * C + j] - m) * (x[i * C + j] - m);
    const double s = 1.0 / std::sqrt(v / C + kLayerNormEps);
    for (int64_t j = 0; j < C; ++j) {
      r.out[i * C + j] = (x[i * C + j] - m) * s * w[j] + b[j];
    }
    r.mean[i] = m;
    r.rstd[i] = s;
  }
  return r;
}

TEST_F(TransformerOpsTest, LayerNormForwardMatchesDouble) {
  // C = 40: two full lanes of 16 and a tail; an offset of 3 that a one-pass
  // E[x^2] - mean^2 would partly cancel.
  const int64_t N = 6, C = 40;
  auto x = Random(N * C, 8);
  for (float& v : x) v += 3.0f;
  const auto w = Random(C, 9), b = Random(C, 10);
  std::vector<float> out(N * C), mean(N), rstd(N);
  ASSERT_TRUE(compute_
                  ->LayerNormForward(x.data(), w.data(), b.data(), out.data(),
                                     mean.data(), rstd.data(), N, C)
                  .ok());
  const LayerNormRef r = NaiveLayerNorm(x, w, b, N, C);
  ExpectNearReference(out, r.out, 1e-5, 2e-6, "out");
  ExpectNearReference(mean, r.mean, 1e-6, 0, "mean");
  ExpectNearReference(rstd, r.rstd, 1e-5, 0, "rstd");
}

TEST_F(TransformerOpsTest, LayerNormBackwardAccumulates) {
  const int64_t N = 5, C = 24;
  const auto x = Random(N * C, 11), w = Random(C, 12), b = Random(C, 13);
  const auto dout = Random(N * C, 14);
  std::vector<float> out(N * C), mean(N), rstd(N);
  ASSERT_TRUE(compute_
                  ->LayerNormForward(x.data(), w.data(), b.data(), out.data(),
                                     mean.data(), rstd.data(), N, C)
                  .ok());
  auto backward = [&](std::vector<float>& dx, std::vector<float>& dw,
                      std::vector<float>& db) {
    ASSERT_TRUE(compute_
                    ->LayerNormBackward(x.data(), w.data(), mean.data(),
                                        rstd.data(), dout.data(), dx.data(),
                                        dw.data(), db.data(), N, C)
                    .ok());
  };
  std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  backward(dx, dw, db);
  const auto px = Random(N * C, 15), pw = Random(C, 16), pb = Random(C, 17);
  std::vector<float> ax = px, aw = pw, ab = pb;
  backward(ax, aw, ab);
  for (int64_t i = 0; i < N * C; ++i) {
    EXPECT_EQ(ax[i], px[i] + dx[i]) << i;  // one add per element: exact
  }
  for (int64_t j = 0; j < C; ++j) {
    EXPECT_NEAR(aw[j], pw[j] + dw[j], 1e-5) << j;
    EXPECT_NEAR(ab[j], pb[j] + db[j], 1e-5) << j;
  }
}

TEST_F(TransformerOpsTest, LayerNormRejectsEmptyRows) {
  float x = 1, w = 1, b = 0, out = kNaN, mean = kNaN, rstd = kNaN;
  EXPECT_EQ(
      compute_->LayerNormForward(&x, &w, &b, &out, &mean, &rstd, 1, 0).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      compute_->LayerNormForward(&x, &w, &b, &out, &mean, &rstd, -1, 1).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::isnan(out) && std::isnan(mean) && std::isnan(rstd));
}

// ---- Attention.

struct AttentionRef {
  std::vector<double> out, lse;
};

// The textbook form: the whole T x T score matrix of each (b, h), the
// future masked with -infinity, a softmax per row.
AttentionRef NaiveAttention(const std::vector<float>& qkv, int64_t B, int64_t T,
                            int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  AttentionRef r{std::vector<double>(B * T * C),
                 std::vector<double>(B * H * T)};
  std::vector<double> s(T * T);
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t i) {
    return static_cast<double>(
        qkv[(b * T + t) * 3 * C + part * C + h * hs + i]);
  };
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < hs; ++i)
            dot += at(b, t, 0, h, i) * at(b, j, 1, h, i);
          s[t * T + j] = j <= t ? dot * scale : -INFINITY;
        }
      }
      for (int64_t t = 0; t < T; ++t) {
        double max = -INFINITY, sum = 0;
        for (int64_t j = 0; j < T; ++j) max = std::max(max, s[t * T + j]);
        for (int64_t j = 0; j < T; ++j) sum += std::exp(s[t * T + j] - max);
        r.lse[(b * H + h) * T + t] = max + std::log(sum);
        for (int64_t i = 0; i < hs; ++i) {
          double o = 0;
          for (int64_t j = 0; j < T; ++j) {
            o += std::exp(s[t * T + j] - max) / sum * at(b, j, 2, h, i);
          }
          r.out[(b * T + t) * C + h * hs + i] = o;
        }
      }
    }
  }
  return r;
}

TEST_F(TransformerOpsTest, AttentionForwardMatchesNaive) {
  struct Shape {
    int64_t B, T, C, H;
  };
  // Heads of 4 (a tail only), 20 (a lane block and a tail) and 1 head of 16.
  for (const Shape& s : {Shape{2, 7, 12, 3}, {1, 9, 40, 2}, {2, 1, 16, 1}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T
                                      << " C=" << s.C << " H=" << s.H);
    const auto qkv = Random(s.B * s.T * 3 * s.C, 18, 2.0f);
    std::vector<float> out(s.B * s.T * s.C, kNaN), lse(s.B * s.H * s.T, kNaN);
    ASSERT_TRUE(compute_
                    ->AttentionForward(qkv.data(), out.data(), lse.data(), s.B,
                                       s.T, s.C, s.H)
                    .ok());
    const AttentionRef r = NaiveAttention(qkv, s.B, s.T, s.C, s.H);
    ExpectNearReference(out, r.out, 1e-5, 1e-5, "out");
    ExpectNearReference(lse, r.lse, 1e-5, 1e-5, "lse");
  }
}

TEST_F(TransformerOpsTest, AttentionRejectsHeadsThatDoNotSplitC) {
  const int64_t B = 1, T = 2, C = 6;
  const auto qkv = Random(B * T * 3 * C, 19);
  std::vector<float> out(B * T * C, kNaN), lse(B * 4 * T, kNaN);
  std::vector<float> dqkv(qkv.size(), kNaN);
  for (int64_t H : {4, 0, -2}) {
    EXPECT_EQ(
        compute_
            ->AttentionForward(qkv.data(), out.data(), lse.data(), B, T, C, H)
            .code(),
        absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(compute_
                  ->AttentionBackward(qkv.data(), out.data(), out.data(),
                                      lse.data(), dqkv.data(), B, T, C, H)
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  for (const auto* v : {&out, &lse, &dqkv}) {
    for (float f : *v) EXPECT_TRUE(std::isnan(f));
  }
}

// ---- Embedding.

TEST_F(TransformerOpsTest, EmbeddingForwardAddsTheRows) {
  const int64_t B = 2, T = 5, C = 8, V = 11;
  const auto tokens = RandomLabels(B * T, V, 20);
  const auto wte = Random(V * C, 21), wpe = Random((T + 2) * C, 22);
  std::vector<float> out(B * T * C, kNaN);
  ASSERT_TRUE(compute_
                  ->EmbeddingForward(tokens.data(), wte.data(), wpe.data(),
                                     out.data(), B, T, C, V)
                  .ok());
  for (int64_t n = 0; n < B * T; ++n) {
    for (int64_t i = 0; i < C; ++i) {
      EXPECT_EQ(out[n * C + i], wte[tokens[n] * C + i] + wpe[(n % T) * C + i]);
    }
  }
}

TEST_F(TransformerOpsTest, EmbeddingBackwardAccumulatesInOrder) {
  const int64_t B = 3, T = 4, C = 20, V = 5;  // V < B T: tokens repeat
  const auto tokens = RandomLabels(B * T, V, 23);
  const auto dout = Random(B * T * C, 24);
  const auto pte = Random(V * C, 25), ppe = Random(T * C, 26);
  std::vector<float> dwte = pte, dwpe = ppe;
  ASSERT_TRUE(compute_
                  ->EmbeddingBackward(tokens.data(), dout.data(), dwte.data(),
                                      dwpe.data(), B, T, C, V)
                  .ok());
  // The documented order, one float add at a time onto the prior values.
  std::vector<float> want_te = pte, want_pe = ppe;
  for (int64_t n = 0; n < B * T; ++n) {
    for (int64_t i = 0; i < C; ++i) {
      want_te[tokens[n] * C + i] += dout[n * C + i];
      want_pe[(n % T) * C + i] += dout[n * C + i];
    }
  }
  EXPECT_TRUE(SameBits(dwte, want_te));
  EXPECT_TRUE(SameBits(dwpe, want_pe));
}

TEST_F(TransformerOpsTest, EmbeddingRejectsABadTokenUntouched) {
  const int64_t B = 2, T = 3, C = 4, V = 7;
  const auto wte = Random(V * C, 27), wpe = Random(T * C, 28);
  const auto dout = Random(B * T * C, 29);
  for (int32_t bad : {7, -1}) {
    std::vector<int32_t> tokens = {1, 2, 3, 4, bad, 0};
    std::vector<float> out(B * T * C, kNaN);
    const absl::Status s = compute_->EmbeddingForward(
        tokens.data(), wte.data(), wpe.data(), out.data(), B, T, C, V);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("position 4"), std::string::npos) << s;
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos) << s;
    for (float f : out) EXPECT_TRUE(std::isnan(f));
    std::vector<float> dwte = wte, dwpe = wpe;
    EXPECT_EQ(compute_
                  ->EmbeddingBackward(tokens.data(), dout.data(), dwte.data(),
                                      dwpe.data(), B, T, C, V)
                  .code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(SameBits(dwte, wte));
    EXPECT_TRUE(SameBits(dwpe, wpe));
  }
}

// ---- Cross-entropy.

TEST_F(TransformerOpsTest, CrossEntropyMatchesDouble) {
  const int64_t rows = 6, V = 37;
  const float grad_scale = 0.125f;
  const auto logits = Random(rows * V, 30, 4.0f);
  const auto targets = RandomLabels(rows, V, 31);
  std::vector<float> d(rows * V, kNaN);
  auto loss = compute_->CrossEntropy(logits.data(), targets.data(), d.data(),
                                     rows, V, grad_scale);
  ASSERT_TRUE(loss.ok()) << loss.status();
  double want_loss = 0;
  std::vector<double> want_d(rows * V);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * V;
    double max = z[0], sum = 0;
    for (int64_t j = 0; j < V; ++j) max = std::max(max, double{z[j]});
    for (int64_t j = 0; j < V; ++j) sum += std::exp(z[j] - max);
    want_loss += std::log(sum) - (z[targets[r]] - max);
    for (int64_t j = 0; j < V; ++j) {
      want_d[r * V + j] =
          (std::exp(z[j] - max) / sum - (j == targets[r])) * grad_scale;
    }
  }
  EXPECT_NEAR(*loss, want_loss, 1e-5 * want_loss);
  ExpectNearReference(d, want_d, 1e-5, 1e-7, "dlogits");
}

TEST_F(TransformerOpsTest, CrossEntropyInPlaceAndLossOnlyGiveTheSameBits) {
  const int64_t rows = 5, V = 50;
  const auto logits = Random(rows * V, 32, 3.0f);
  const auto targets = RandomLabels(rows, V, 33);
  std::vector<float> d(rows * V);
  auto apart = compute_->CrossEntropy(logits.data(), targets.data(), d.data(),
                                      rows, V, 0.5f);
  std::vector<float> in_place = logits;
  auto same = compute_->CrossEntropy(in_place.data(), targets.data(),
                                     in_place.data(), rows, V, 0.5f);
  auto only = compute_->CrossEntropy(logits.data(), targets.data(), nullptr,
                                     rows, V, 0.5f);
  ASSERT_TRUE(apart.ok() && same.ok() && only.ok());
  EXPECT_EQ(*apart, *same);
  EXPECT_EQ(*apart, *only);
  EXPECT_TRUE(SameBits(d, in_place));
  // Slices of the batch sum to the whole (each row's loss is the same float).
  auto head = compute_->CrossEntropy(logits.data(), targets.data(), nullptr, 2,
                                     V, 0.5f);
  auto tail = compute_->CrossEntropy(logits.data() + 2 * V, targets.data() + 2,
                                     nullptr, 3, V, 0.5f);
  ASSERT_TRUE(head.ok() && tail.ok());
  EXPECT_NEAR(*head + *tail, *only, 1e-12 * *only);
}

TEST_F(TransformerOpsTest, CrossEntropyIsStableForLargeLogits) {
  std::vector<float> z = {1000.0f, 999.0f, -1000.0f};
  const std::vector<int32_t> target = {1};
  auto loss =
      compute_->CrossEntropy(z.data(), target.data(), z.data(), 1, 3, 1.0f);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss, std::log(1 + std::exp(-1.0)) + 1.0, 1e-5);
  for (float f : z) EXPECT_TRUE(std::isfinite(f));
}

TEST_F(TransformerOpsTest, CrossEntropyRejectsABadTargetUntouched) {
  const int64_t rows = 3, V = 4;
  const auto logits = Random(rows * V, 34);
  for (int32_t bad : {4, -1}) {
    const std::vector<int32_t> targets = {0, 3, bad};
    std::vector<float> d(rows * V, kNaN);
    std::vector<float> in_place = logits;
    auto s = compute_->CrossEntropy(logits.data(), targets.data(), d.data(),
                                    rows, V, 1.0f);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    s = compute_->CrossEntropy(in_place.data(), targets.data(), in_place.data(),
                               rows, V, 1.0f);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    for (float f : d) EXPECT_TRUE(std::isnan(f));
    EXPECT_TRUE(SameBits(in_place, logits));
  }
}

// ---- Elementwise and the norm.

TEST_F(TransformerOpsTest, AddAndScaleAreExactAndWorkInPlace) {
  const int64_t n = 1000;
  const auto a = Random(n, 35), b = Random(n, 36);
  std::vector<float> out(n), acc = a, x = a;
  ASSERT_TRUE(compute_->Add(a.data(), b.data(), out.data(), n).ok());
  ASSERT_TRUE(compute_->Add(acc.data(), b.data(), acc.data(), n).ok());
  ASSERT_TRUE(compute_->Scale(x.data(), -0.3f, n).ok());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i], a[i] + b[i]);
    EXPECT_EQ(x[i], a[i] * -0.3f);
  }
  EXPECT_TRUE(SameBits(acc, out));
  EXPECT_EQ(compute_->Add(a.data(), b.data(), out.data(), -1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compute_->Scale(x.data(), 2.0f, -1).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TransformerOpsTest, SumOfSquaresMatchesDouble) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, kSumOfSquaresBlock,
                    2 * kSumOfSquaresBlock + 5}) {
    const auto x = Random(n, 37, 3.0f);
    double want = 0;
    for (float v : x) want += double{v} * v;
    auto got = compute_->SumOfSquares(x.data(), n);
    ASSERT_TRUE(got.ok());
    EXPECT_NEAR(*got, want, 1e-12 * want) << n;
  }
  EXPECT_EQ(compute_->SumOfSquares(nullptr, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::train
