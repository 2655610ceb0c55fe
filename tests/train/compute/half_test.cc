// half_test.cc: train/compute/half.h's scalar conversions against references
// built from double arithmetic: every one of the 2^16 bf16 and fp16 bit
// patterns back to float; round to nearest even at and around every midpoint
// between neighbouring 16-bit values (ties, one float either side), overflow,
// subnormals and NaN; stochastic rounding's reproducibility, exactness on
// representable values and unbiased mean over many seeds. Also the
// precision and rounding names (precision.h).
#include "train/compute/half.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "train/compute/precision.h"

namespace strata::train {
namespace {

// The value of fp16 bits h by the format's definition, in double.
double Fp16Value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) {
    return m ? std::numeric_limits<double>::quiet_NaN()
             : sign * std::numeric_limits<double>::infinity();
  }
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

double Bf16Value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 7) & 0xff;
  const int m = h & 0x7f;
  if (e == 0xff) {
    return m ? std::numeric_limits<double>::quiet_NaN()
             : sign * std::numeric_limits<double>::infinity();
  }
  if (e == 0) return sign * std::ldexp(m, -133);
  return sign * std::ldexp(128 + m, e - 134);
}

TEST(HalfTest, EveryFp16PatternWidensExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFloat(static_cast<uint16_t>(h));
    const double want = Fp16Value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // Quieted, payload kept, sign kept: what F16C's vcvtph2ps gives.
      ASSERT_EQ(FloatBits(f),
                ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13))
          << std::hex << h;
      ASSERT_EQ(FloatToFp16(f), h | 0x200u) << std::hex << h;
      continue;
    }
    ASSERT_EQ(double{f}, want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
    // Back to the same bits, both roundings (the value is representable).
    ASSERT_EQ(FloatToFp16(f), h) << std::hex << h;
    ASSERT_EQ(FloatToFp16(f, true, 0xffffffffu), h) << std::hex << h;
  }
}

TEST(HalfTest, EveryBf16PatternWidensExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(FloatBits(f), h << 16) << std::hex << h;
    const double want = Bf16Value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f));
      ASSERT_EQ(FloatToBf16(f), h | 0x40u) << std::hex << h;  // quieted
      continue;
    }
    ASSERT_EQ(double{f}, want) << std::hex << h;
    ASSERT_EQ(FloatToBf16(f), h) << std::hex << h;
    ASSERT_EQ(FloatToBf16(f, true, 0xffffffffu), h) << std::hex << h;
  }
}

// Round to nearest even by the definition: the nearer of the two
// neighbours lo < x < hi (values of bits h and h + 1), the even one on a
// tie. For positive x only; the sign is symmetric and checked separately.
uint16_t NearestEven(double x, uint16_t h_lo, double lo, double hi) {
  if (x - lo < hi - x) return h_lo;
  if (x - lo > hi - x) return static_cast<uint16_t>(h_lo + 1);
  return (h_lo & 1) ? static_cast<uint16_t>(h_lo + 1) : h_lo;
}

// For each pair of neighbouring positive finite values (and the largest
// finite value against infinity's rounding boundary), floats at the
// midpoint and one float either side of it, and a quarter of the way.
template <typename Narrow, typename Value>
void CheckNearestEvenAroundMidpoints(Narrow narrow, Value value,
                                     uint16_t max_finite) {
  for (uint32_t h = 0; h < max_finite; ++h) {
    const double lo = value(static_cast<uint16_t>(h));
    const double hi = value(static_cast<uint16_t>(h + 1));
    const double mid = (lo + hi) / 2;
    const float mid_f = static_cast<float>(mid);
    ASSERT_EQ(double{mid_f}, mid) << "midpoint not a float at " << h;
    const float probes[] = {mid_f, std::nextafter(mid_f, 0.0f),
                            std::nextafter(mid_f, 1e30f),
                            static_cast<float>(lo + (hi - lo) / 4),
                            static_cast<float>(hi - (hi - lo) / 4)};
    for (float x : probes) {
      const uint16_t want = NearestEven(x, static_cast<uint16_t>(h), lo, hi);
      ASSERT_EQ(narrow(x), want) << std::hex << h << " x=" << x;
      ASSERT_EQ(narrow(-x), want | 0x8000u) << std::hex << h << " x=" << -x;
    }
  }
}

TEST(HalfTest, Fp16NearestEvenAtEveryMidpoint) {
  CheckNearestEvenAroundMidpoints([](float x) { return FloatToFp16(x); },
                                  Fp16Value, 0x7bff);
}

TEST(HalfTest, Bf16NearestEvenAtEveryMidpoint) {
  CheckNearestEvenAroundMidpoints([](float x) { return FloatToBf16(x); },
                                  Bf16Value, 0x7f7f);
}

TEST(HalfTest, Fp16OverflowUnderflowAndSpecials) {
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  // 65520 is the midpoint to the next (unrepresentable) value 65536: the
  // tie goes to the even mantissa, which is infinity's.
  EXPECT_EQ(FloatToFp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToFp16(1e10f), 0x7c00);
  EXPECT_EQ(FloatToFp16(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  // Smallest subnormal 2^-24; half of it ties to zero, just above rounds up.
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToFp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToFp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ties to 2
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToFp16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(FloatToFp16(std::nextafter(std::ldexp(1.0f, -14), 0.0f)), 0x0400);
  EXPECT_EQ(FloatToFp16(std::nanf("")) & 0x7e00, 0x7e00);
  EXPECT_TRUE(Fp16NonFinite(0x7c00));
  EXPECT_TRUE(Fp16NonFinite(0xfe00));
  EXPECT_FALSE(Fp16NonFinite(0x7bff));
}

TEST(HalfTest, Bf16OverflowAndSpecials) {
  const float max = std::numeric_limits<float>::max();
  EXPECT_EQ(FloatToBf16(max), 0x7f80);  // rounds past bf16's largest
  EXPECT_EQ(FloatToBf16(Bf16ToFloat(0x7f7f)), 0x7f7f);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  // Signalling NaN 0x7f800001: quieted, never turned into infinity.
  EXPECT_EQ(FloatToBf16(BitsFloat(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(FloatToBf16(BitsFloat(0xff800001u), true, 0xffffffffu), 0xffc0);
  EXPECT_TRUE(Bf16NonFinite(0x7f80));
  EXPECT_TRUE(Bf16NonFinite(0xffc1));
  EXPECT_FALSE(Bf16NonFinite(0x7f7f));
}

TEST(HalfTest, StochasticBitsAreAFunctionOfSeedAndIndex) {
  EXPECT_EQ(StochasticBits(7, 12345), StochasticBits(7, 12345));
  EXPECT_NE(StochasticBits(7, 12345), StochasticBits(8, 12345));
  EXPECT_NE(StochasticBits(7, 12345), StochasticBits(7, 12346));
  // The high half of SplitMix64's second output from state 7.
  uint64_t state = 7;
  SplitMix64Next(state);
  EXPECT_EQ(StochasticBits(7, 1),
            static_cast<uint32_t>(SplitMix64Next(state) >> 32));
  EXPECT_EQ(StochasticSeed(1, 2, 3), StochasticSeed(1, 2, 3));
  EXPECT_NE(StochasticSeed(1, 2, 3), StochasticSeed(1, 2, 4));
  EXPECT_NE(StochasticSeed(1, 2, 3), StochasticSeed(1, 3, 3));
}

// Over many seeds, stochastic rounding's mean equals x within a few
// standard errors, and every result is one of x's two neighbours.
template <typename Narrow, typename Widen>
void CheckUnbiased(Narrow narrow, Widen widen, float x) {
  constexpr int kDraws = 20000;
  const uint16_t down = narrow(x, true, 0u);
  const uint16_t up = narrow(x, true, 0xffffffffu);
  const double lo = widen(down), hi = widen(up);
  ASSERT_LE(std::abs(lo), std::abs(double{x}));
  ASSERT_GE(std::abs(hi), std::abs(double{x}));
  double sum = 0;
  for (int s = 0; s < kDraws; ++s) {
    const uint16_t h =
        narrow(x, true, StochasticBits(StochasticSeed(42, 0, s), 0));
    ASSERT_TRUE(h == down || h == up) << x;
    sum += widen(h);
  }
  const double p = (double{x} - lo) / (hi - lo);
  const double sigma = std::abs(hi - lo) * std::sqrt(p * (1 - p) / kDraws);
  EXPECT_NEAR(sum / kDraws, double{x}, 5 * sigma + 1e-12 * std::abs(x)) << x;
}

TEST(HalfTest, StochasticRoundingIsUnbiased) {
  const auto fp16 = [](float x, bool s, uint32_t r) {
    return FloatToFp16(x, s, r);
  };
  const auto bf16 = [](float x, bool s, uint32_t r) {
    return FloatToBf16(x, s, r);
  };
  for (float x : {1.0f + 0.3f / 1024, -3.14159f, 1e-3f, 0.7f * 5.96e-8f,
                  3.3e-6f, 60000.7f}) {
    CheckUnbiased(fp16, Fp16ToFloat, x);
  }
  for (float x : {1.0f + 0.3f / 128, -3.14159f, 1e-30f, 1e-39f, 2.5e38f}) {
    CheckUnbiased(bf16, Bf16ToFloat, x);
  }
}

TEST(HalfTest, StochasticRoundingRoundsUpWithTheFractionsProbability) {
  // x = 1 + 1/4 ulp: the low 13 bits are 0x800, a fraction of exactly 1/4,
  // so random bits r round up iff r >= 3/4 * 2^32.
  const float x = BitsFloat(0x3f800000u | 0x800u);
  EXPECT_EQ(FloatToFp16(x, true, 0xbfffffffu), 0x3c00);
  EXPECT_EQ(FloatToFp16(x, true, 0xc0000000u), 0x3c01);
  EXPECT_EQ(FloatToBf16(BitsFloat(0x3f804000u), true, 0xbfffffffu), 0x3f80);
  EXPECT_EQ(FloatToBf16(BitsFloat(0x3f804000u), true, 0xc0000000u), 0x3f81);
}

TEST(PrecisionTest, NamesRoundTrip) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    auto parsed = ParsePrecision(PrecisionName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_EQ(PrecisionBytes(Precision::kFp32), 4);
  EXPECT_EQ(PrecisionBytes(Precision::kBf16), 2);
  const auto bad = ParsePrecision("fp8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bf16"), std::string::npos);
  EXPECT_EQ(*ParseRounding("stochastic"), Rounding::kStochastic);
  EXPECT_EQ(*ParseRounding("nearest"), Rounding::kNearestEven);
  EXPECT_FALSE(ParseRounding("up").ok());
  EXPECT_TRUE(CheckHalfPrecision(Precision::kFp16, "cast").ok());
  const absl::Status fp32 = CheckHalfPrecision(Precision::kFp32, "cast");
  EXPECT_EQ(fp32.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fp32.message().find("cast"), std::string::npos);
}

}  // namespace
}  // namespace strata::train
