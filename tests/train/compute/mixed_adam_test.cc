// mixed_adam_test.cc: the fused mixed-precision AdamW pass
// (AdamMixedUpdateCpu, compute.h; per-path kernels in cpu_adam_mixed.cc) on
// every vector path this CPU runs, bf16 and fp16, both roundings: bit for
// bit the fp32 flow it replaces (widen the gradient, ScaleCpu it and the
// weights, AdamUpdateCpu, round the new weights with half.h), at any split
// over a pool; the non-finite count; and CpuCompute::AdamMixed's checks.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "gtest/gtest.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/cpu_adam.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/compute/half.h"

namespace strata::train {
namespace {

// Each path is its own test, skipped (not passed) where this CPU lacks it.
class MixedAdamPathTest : public ::testing::TestWithParam<VectorPath> {
 protected:
  void SetUp() override {
    if (!VectorPathSupported(GetParam())) {
      GTEST_SKIP() << "this CPU (or OS) does not run the "
                   << VectorPathName(GetParam())
                   << " path (__builtin_cpu_supports says no), so it cannot "
                      "be checked here";
    }
  }
};

// A few steps in: w in [-1, 1), m small, v >= 0, g16 the 16-bit gradient
// of a value in [-8, 8) (as a loss-scaled gradient might be).
struct State {
  std::vector<float> w, m, v;
  std::vector<uint16_t> g16, w16;
  State(int64_t n, Precision type, uint64_t seed)
      : w(n), m(n), v(n), g16(n), w16(n, 0xdead) {
    uint64_t rng = seed;
    const auto unit = [&] {
      return float(int64_t(SplitMix64Next(rng) >> 40) - (int64_t{1} << 23)) /
             float(int64_t{1} << 23);
    };
    for (int64_t i = 0; i < n; ++i) {
      w[i] = unit();
      m[i] = unit() * 0.1f;
      v[i] = std::abs(unit()) * 1e-2f;
      const float g = unit() * 8.0f;
      g16[i] = type == Precision::kFp16 ? FloatToFp16(g) : FloatToBf16(g);
    }
  }
  bool SameAs(const State& o) const {
    const size_t b = w.size() * sizeof(float);
    return std::memcmp(w.data(), o.w.data(), b) == 0 &&
           std::memcmp(m.data(), o.m.data(), b) == 0 &&
           std::memcmp(v.data(), o.v.data(), b) == 0 && w16 == o.w16;
  }
};

AdamParams Params() {
  AdamParams p;
  p.lr = 1e-3f;
  p.correction1 = 1.0f / (1.0f - 0.9f * 0.9f * 0.9f);
  p.correction2 = 1.0f / (1.0f - 0.999f * 0.999f * 0.999f);
  return p;
}

// The unfused fp32 flow, element by element through the library's own
// fp32 kernel.
void Reference(const AdamParams& p, const MixedAdamParams& mp, State* s) {
  const int64_t n = s->w.size();
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = mp.type == Precision::kFp16 ? Fp16ToFloat(s->g16[i])
                                       : Bf16ToFloat(s->g16[i]);
  }
  ScaleCpu(g.data(), mp.grad_scale, n);
  ScaleCpu(s->w.data(), mp.decay, n);
  AdamUpdateCpu(p, s->w.data(), s->m.data(), s->v.data(), g.data(), n);
  const bool sr = mp.rounding.rounding == Rounding::kStochastic;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r =
        sr ? StochasticBits(mp.rounding.seed, mp.rounding.first_index + i) : 0;
    s->w16[i] = mp.type == Precision::kFp16 ? FloatToFp16(s->w[i], sr, r)
                                            : FloatToBf16(s->w[i], sr, r);
  }
}

TEST_P(MixedAdamPathTest, MatchesTheFp32FlowBitForBit) {
  const VectorPath path = GetParam();
  constexpr int64_t kN = 4099;  // odd: every path's tail runs
  const AdamParams p = Params();
  for (Precision type : {Precision::kBf16, Precision::kFp16}) {
    for (Rounding rounding : {Rounding::kNearestEven, Rounding::kStochastic}) {
      // Unscale by 2^-10 and clip by 0.75 folded; AdamW decay.
      const MixedAdamParams mp{
          type, 0.75f / 1024.0f, 1.0f - 1e-3f * 0.1f, {rounding, 77, 3}};
      State want(kN, type, 5);
      Reference(p, mp, &want);
      {  // this test's path
        State got(kN, type, 5);
        EXPECT_EQ(
            AdamMixedRange(path, p, mp, got.w.data(), got.m.data(),
                           got.v.data(), got.g16.data(), got.w16.data(), kN),
            0);
        EXPECT_TRUE(got.SameAs(want))
            << VectorPathName(path) << " " << PrecisionName(type) << " "
            << RoundingName(rounding);
      }
    }
  }
}

TEST(MixedAdamTest, SplitsOverAPoolGiveTheSameBits) {
  const int64_t n = 3 * kAdamMinElementsPerThread + 5;
  HostPool pool(3);
  const AdamParams p = Params();
  const MixedAdamParams mp{
      Precision::kBf16, 0.5f, 1.0f, {Rounding::kStochastic, 9, 0}};
  State want(n, mp.type, 11);
  AdamMixedRange(ChosenVectorPath(), p, mp, want.w.data(), want.m.data(),
                 want.v.data(), want.g16.data(), want.w16.data(), n);
  State got(n, mp.type, 11);
  const int64_t jobs = pool.split_jobs();
  AdamMixedUpdateCpuWith(ChosenVectorPath(), pool, p, mp, got.w.data(),
                         got.m.data(), got.v.data(), got.g16.data(),
                         got.w16.data(), n);
  EXPECT_GT(pool.split_jobs(), jobs);
  EXPECT_TRUE(got.SameAs(want));
}

TEST_P(MixedAdamPathTest, CountsNonFiniteGradients) {
  constexpr int64_t kN = 100;
  State s(kN, Precision::kFp16, 3);
  s.g16[0] = 0x7c00;   // +inf
  s.g16[17] = 0xfe00;  // NaN
  s.g16[99] = 0xfc00;  // -inf, in the tail
  const MixedAdamParams mp{Precision::kFp16};
  EXPECT_EQ(AdamMixedRange(GetParam(), Params(), mp, s.w.data(), s.m.data(),
                           s.v.data(), s.g16.data(), s.w16.data(), kN),
            3);
  EXPECT_TRUE(Fp16NonFinite(s.w16[17]));  // NaN propagates, not hidden
  EXPECT_FALSE(Fp16NonFinite(s.w16[50]));
}

TEST(MixedAdamTest, ComputeAdamMixedChecksAndCounts) {
  auto cpu = MakeCpuCompute();
  State s(64, Precision::kBf16, 1);
  s.g16[3] = 0x7f80;
  MixedAdamParams mp{Precision::kBf16};
  ASSERT_TRUE(cpu->AdamMixed(Params(), mp, s.w.data(), s.m.data(), s.v.data(),
                             s.g16.data(), s.w16.data(), 64)
                  .ok());
  EXPECT_EQ(*cpu->TakeNonFinite(), 1);
  EXPECT_EQ(*cpu->TakeNonFinite(), 0);  // taken: reset
  mp.type = Precision::kFp32;
  const absl::Status bad =
      cpu->AdamMixed(Params(), mp, s.w.data(), s.m.data(), s.v.data(),
                     s.g16.data(), s.w16.data(), 64);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("kBf16"), std::string::npos) << bad;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, MixedAdamPathTest,
                         ::testing::ValuesIn(kVectorPaths),
                         [](const ::testing::TestParamInfo<VectorPath>& info) {
                           return std::string(VectorPathName(info.param));
                         });

}  // namespace
}  // namespace strata::train
