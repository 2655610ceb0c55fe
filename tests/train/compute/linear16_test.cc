// linear16_test.cc: the 16-bit linear layers and casts on the CPU compute
// (Compute::LinearForward16/LinearBackward16, CastToHalf/CastToFloat;
// train/compute/cpu/cpu_linear16.h): against a double-precision reference over
// the 16-bit-rounded operands, at shapes that span several tiles and ragged
// edges; gradient accumulation; the same bits at 1 and 2 OpenBLAS threads;
// the non-finite count; no bias; the 16-bit embedding; and the errors for
// fp32 and bad sizes.
#include <cblas.h>

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
#include "train/compute/cpu/cpu_linear16.h"
#include "train/compute/half.h"

namespace strata::train {
namespace {

using ::strata::train::testing::Random;
using ::strata::train::testing::SameBits;

struct Shape {
  int64_t batch, in, out;
};
// 300, 270 and 130 cross kLinear16Tile (64) with ragged tiles; 0 is empty.
constexpr Shape kShapes[] = {
    {1, 1, 1}, {3, 5, 7}, {33, 300, 10}, {270, 40, 130}, {4, 0, 5}};

uint16_t Narrow(Precision t, float x) {
  return t == Precision::kFp16 ? FloatToFp16(x) : FloatToBf16(x);
}
double Widen(Precision t, uint16_t h) {
  return t == Precision::kFp16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
}
// x rounded to `t`, as a double.
double R(Precision t, float x) { return Widen(t, Narrow(t, x)); }

std::vector<uint16_t> ToHalf(Precision t, const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = Narrow(t, x[i]);
  return h;
}

// |got - want| within the error of an fp32 sum of `k` terms whose absolute
// values sum to `scale`.
void ExpectNear(float got, double want, double scale, int64_t k,
                const char* what, size_t i) {
  const double tol = 2.0 * (k + 2) * 6e-8 * scale + 1e-30;
  ASSERT_NEAR(got, want, tol) << what << "[" << i << "]";
}

class Linear16Test : public ::testing::TestWithParam<Precision> {
 protected:
  std::unique_ptr<Compute> cpu_ = MakeCpuCompute();
  Precision t() const { return GetParam(); }
};

TEST_P(Linear16Test, ForwardMatchesADoubleReference) {
  for (const Shape& s : kShapes) {
    const auto x = Random(s.batch * s.in, 1);
    const auto w16 = ToHalf(t(), Random(s.out * s.in, 2, 0.1f));
    const auto b16 = ToHalf(t(), Random(s.out, 3));
    std::vector<float> y(s.batch * s.out, std::nanf(""));
    ASSERT_TRUE(cpu_->LinearForward16(t(), x.data(), w16.data(), b16.data(),
                                      y.data(), s.batch, s.in, s.out)
                    .ok());
    for (int64_t i = 0; i < s.batch; ++i) {
      for (int64_t j = 0; j < s.out; ++j) {
        double want = Widen(t(), b16[j]), scale = std::abs(want);
        for (int64_t k = 0; k < s.in; ++k) {
          const double term =
              R(t(), x[i * s.in + k]) * Widen(t(), w16[j * s.in + k]);
          want += term;
          scale += std::abs(term);
        }
        ExpectNear(y[i * s.out + j], want, scale, s.in, "y", i * s.out + j);
      }
    }
  }
}

TEST_P(Linear16Test, BackwardMatchesADoubleReferenceAndAccumulates) {
  for (const Shape& s : kShapes) {
    const auto x = Random(s.batch * s.in, 4);
    const auto w16 = ToHalf(t(), Random(s.out * s.in, 5, 0.1f));
    const auto dy = Random(s.batch * s.out, 6, 0.01f);
    std::vector<float> dw(s.out * s.in, std::nanf("")),
        db(s.out, std::nanf(""));
    std::vector<float> dx(s.batch * s.in, std::nanf(""));
    ASSERT_TRUE(cpu_->LinearBackward16(t(), x.data(), w16.data(), dy.data(),
                                       dw.data(), db.data(), dx.data(), s.batch,
                                       s.in, s.out, /*accumulate=*/false)
                    .ok());
    for (int64_t o = 0; o < s.out; ++o) {
      double want_b = 0;
      for (int64_t b = 0; b < s.batch; ++b) want_b += dy[b * s.out + o];
      ExpectNear(db[o], want_b, 0.01 * s.batch, s.batch, "db", o);
      for (int64_t k = 0; k < s.in; ++k) {
        double want = 0, scale = 0;
        for (int64_t b = 0; b < s.batch; ++b) {
          const double term =
              R(t(), dy[b * s.out + o]) * R(t(), x[b * s.in + k]);
          want += term;
          scale += std::abs(term);
        }
        ExpectNear(dw[o * s.in + k], want, scale, s.batch, "dw", o * s.in + k);
      }
    }
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t k = 0; k < s.in; ++k) {
        double want = 0, scale = 0;
        for (int64_t o = 0; o < s.out; ++o) {
          const double term =
              R(t(), dy[b * s.out + o]) * Widen(t(), w16[o * s.in + k]);
          want += term;
          scale += std::abs(term);
        }
        ExpectNear(dx[b * s.in + k], want, scale, s.out, "dx", b * s.in + k);
      }
    }
    // A second micro-batch accumulates: dw += and db +=, dx overwritten.
    const std::vector<float> dw1 = dw, db1 = db;
    std::vector<float> dw2(dw.size()), db2(db.size());
    ASSERT_TRUE(cpu_->LinearBackward16(t(), x.data(), w16.data(), dy.data(),
                                       dw2.data(), db2.data(), nullptr, s.batch,
                                       s.in, s.out, false)
                    .ok());
    ASSERT_TRUE(cpu_->LinearBackward16(t(), x.data(), w16.data(), dy.data(),
                                       dw.data(), db.data(), nullptr, s.batch,
                                       s.in, s.out, /*accumulate=*/true)
                    .ok());
    // sgemm adds into dw within its own sum (beta = 1), so dw agrees with
    // the explicit sum to the sum's rounding (relative to the largest
    // term: entries cancel); db's chunked adds are checked exactly.
    double max_dw = 0;
    for (float g : dw1) max_dw = std::max(max_dw, double{std::abs(g)});
    for (size_t i = 0; i < dw.size(); ++i) {
      ASSERT_NEAR(dw[i], dw1[i] + dw2[i], 1e-5 * max_dw) << i;
    }
    // db gains each chunk of kReductionRows rows' sum in turn (compute.h).
    for (int64_t o = 0; o < s.out; ++o) {
      float want = db1[o];
      for (int64_t r0 = 0; r0 < s.batch; r0 += kReductionRows) {
        float chunk = 0.0f;
        for (int64_t b = r0; b < std::min(s.batch, r0 + kReductionRows); ++b) {
          chunk += dy[b * s.out + o];
        }
        want += chunk;
      }
      ASSERT_EQ(db[o], want) << o;
    }
  }
}

TEST_P(Linear16Test, SameBitsAtOneAndTwoBlasThreads) {
  // Large enough that OpenBLAS would split one sgemm over two threads
  // (it did, and the bits differed, before the 64^3 tiles).
  const Shape s{256, 256, 256};
  const auto x = Random(s.batch * s.in, 7);
  const auto w16 = ToHalf(t(), Random(s.out * s.in, 8, 0.1f));
  const auto b16 = ToHalf(t(), Random(s.out, 9));
  std::vector<std::vector<float>> y(2, std::vector<float>(s.batch * s.out));
  std::vector<std::vector<float>> dw(2, std::vector<float>(s.out * s.in));
  std::vector<float> db(s.out);
  for (int threads : {1, 2}) {
    auto cpu = MakeCpuCompute(threads);
    ASSERT_TRUE(cpu->LinearForward16(t(), x.data(), w16.data(), b16.data(),
                                     y[threads - 1].data(), s.batch, s.in,
                                     s.out)
                    .ok());
    ASSERT_TRUE(cpu->LinearBackward16(t(), x.data(), w16.data(),
                                      y[threads - 1].data(),
                                      dw[threads - 1].data(), db.data(),
                                      nullptr, s.batch, s.in, s.out, false)
                    .ok());
  }
  MakeCpuCompute(0);
  EXPECT_TRUE(SameBits(y[0], y[1]));
  EXPECT_TRUE(SameBits(dw[0], dw[1]));
}

TEST_P(Linear16Test, CastsCountNonFiniteAndRoundTrip) {
  std::vector<float> x = {
      1.0f,          1e6f, -std::numeric_limits<float>::infinity(),
      std::nanf(""), 3.0f, 70000.0f};
  std::vector<uint16_t> h(x.size());
  ASSERT_TRUE(cpu_->CastToHalf(t(), {}, x.data(), h.data(), x.size()).ok());
  // fp16 also overflows at 1e6 and 70000.
  EXPECT_EQ(*cpu_->TakeNonFinite(), t() == Precision::kFp16 ? 4 : 2);
  EXPECT_EQ(*cpu_->TakeNonFinite(), 0);
  std::vector<float> back(x.size());
  ASSERT_TRUE(cpu_->CastToFloat(t(), h.data(), back.data(), x.size()).ok());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[4], 3.0f);
  EXPECT_TRUE(std::isnan(back[3]));
}

TEST_P(Linear16Test, NoBiasIsAZeroBias) {
  // The GPT's tied classifier: no bias in forward, no db in backward.
  const Shape s{33, 300, 70};
  const auto x = Random(s.batch * s.in, 11);
  const auto w16 = ToHalf(t(), Random(s.out * s.in, 12, 0.1f));
  const std::vector<uint16_t> zero(s.out, 0);
  std::vector<float> y0(s.batch * s.out), y(s.batch * s.out, std::nanf(""));
  ASSERT_TRUE(cpu_->LinearForward16(t(), x.data(), w16.data(), zero.data(),
                                    y0.data(), s.batch, s.in, s.out)
                  .ok());
  ASSERT_TRUE(cpu_->LinearForward16(t(), x.data(), w16.data(), nullptr,
                                    y.data(), s.batch, s.in, s.out)
                  .ok());
  // 0 + a sum is the sum: the same bits.
  EXPECT_TRUE(SameBits(y, y0));
  std::vector<float> dw0(s.out * s.in), db(s.out), dx0(s.batch * s.in);
  std::vector<float> dw(dw0.size()), dx(dx0.size());
  ASSERT_TRUE(cpu_->LinearBackward16(t(), x.data(), w16.data(), y.data(),
                                     dw0.data(), db.data(), dx0.data(), s.batch,
                                     s.in, s.out, false)
                  .ok());
  ASSERT_TRUE(cpu_->LinearBackward16(t(), x.data(), w16.data(), y.data(),
                                     dw.data(), nullptr, dx.data(), s.batch,
                                     s.in, s.out, false)
                  .ok());
  EXPECT_TRUE(SameBits(dw, dw0));
  EXPECT_TRUE(SameBits(dx, dx0));
}

TEST_P(Linear16Test, EmbeddingOf16BitTablesIsTheWidenedOnes) {
  constexpr int64_t B = 3, T = 5, C = 37, V = 11;
  const auto wte16 = ToHalf(t(), Random(V * C, 13));
  const auto wpe16 = ToHalf(t(), Random(T * C, 14));
  std::vector<float> wte(V * C), wpe(T * C);
  for (size_t i = 0; i < wte.size(); ++i) wte[i] = Widen(t(), wte16[i]);
  for (size_t i = 0; i < wpe.size(); ++i) wpe[i] = Widen(t(), wpe16[i]);
  std::vector<int32_t> tokens(B * T);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (7 * i + 3) % V;
  std::vector<float> want(B * T * C), got(B * T * C, std::nanf(""));
  ASSERT_TRUE(cpu_->EmbeddingForward(tokens.data(), wte.data(), wpe.data(),
                                     want.data(), B, T, C, V)
                  .ok());
  ASSERT_TRUE(cpu_->EmbeddingForward16(t(), tokens.data(), wte16.data(),
                                       wpe16.data(), got.data(), B, T, C, V)
                  .ok());
  EXPECT_TRUE(SameBits(got, want));
  tokens[4] = static_cast<int32_t>(V);  // out of range: refused
  const absl::Status bad = cpu_->EmbeddingForward16(
      t(), tokens.data(), wte16.data(), wpe16.data(), got.data(), B, T, C, V);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_EQ(
      cpu_->EmbeddingForward16(Precision::kFp32, tokens.data(), wte16.data(),
                               wpe16.data(), got.data(), B, T, C, V)
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_P(Linear16Test, RefusesFp32AndBadSizes) {
  float f = 0;
  uint16_t h = 0;
  for (const absl::Status& s :
       {cpu_->CastToHalf(Precision::kFp32, {}, &f, &h, 1),
        cpu_->CastToFloat(Precision::kFp32, &h, &f, 1),
        cpu_->CastToHalf(t(), {}, &f, &h, -1),
        cpu_->LinearForward16(Precision::kFp32, &f, &h, &h, &f, 1, 1, 1),
        cpu_->LinearForward16(t(), &f, &h, &h, &f, -1, 1, 1),
        cpu_->LinearBackward16(t(), &f, &h, &f, &f, &f, nullptr, 1,
                               int64_t{1} << 40, 1, false)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Linear16Test,
                         ::testing::Values(Precision::kBf16, Precision::kFp16),
                         [](const auto& info) {
                           return std::string(PrecisionName(info.param));
                         });

}  // namespace
}  // namespace strata::train
