// half_cast_test.cc: the host casts (train/compute/cpu/half_cast.h) on every
// vector path this CPU runs, bit for bit against half.h's scalar functions:
// float inputs at and around every bf16 and fp16 rounding point, NaNs,
// infinities, subnormals and random bit patterns, odd lengths so the tails run;
// both roundings; the non-finite count; any split over a pool and any cut into
// pieces (first_index) giving the same bits; every 16-bit pattern widened.
#include "train/compute/cpu/half_cast.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/splitmix64.h"
#include "gtest/gtest.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/compute/half.h"

namespace strata::train {
namespace {

constexpr Precision kTypes[] = {Precision::kBf16, Precision::kFp16};
constexpr Rounding kRoundings[] = {Rounding::kNearestEven,
                                   Rounding::kStochastic};

// Each path is its own test, skipped (not passed) where this CPU lacks it.
class HalfCastPathTest : public ::testing::TestWithParam<VectorPath> {
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

// Floats at and around the rounding points of both formats, specials and
// random bit patterns; an odd count.
std::vector<float> Inputs() {
  std::vector<uint32_t> bits;
  uint64_t rng = 2024;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0x0001u}) {
      bits.push_back((h << 16) | low);  // bf16's ties and neighbours
    }
    const uint32_t f = FloatBits(Fp16ToFloat(static_cast<uint16_t>(h)));
    for (uint32_t d : {0x0u, 0xfffu, 0x1000u, 0x1001u}) bits.push_back(f + d);
  }
  for (int i = 0; i < 100001; ++i) {
    bits.push_back(static_cast<uint32_t>(SplitMix64Next(rng)));
    // Magnitudes below 2^-13: fp16's subnormal range and float's.
    bits.push_back(static_cast<uint32_t>(SplitMix64Next(rng)) & 0x8fffffffu);
  }
  bits.push_back(0x7f800000u);
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * sizeof(float));
  return x;
}

// half.h's scalar cast of the whole array, and its non-finite count.
int64_t Reference(Precision type, const RoundingMode& mode,
                  const std::vector<float>& x, std::vector<uint16_t>* out) {
  out->resize(x.size());
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool sr = mode.rounding == Rounding::kStochastic;
    const uint32_t r = sr ? StochasticBits(mode.seed, mode.first_index + i) : 0;
    const uint16_t h = type == Precision::kFp16 ? FloatToFp16(x[i], sr, r)
                                                : FloatToBf16(x[i], sr, r);
    (*out)[i] = h;
    bad += (type == Precision::kFp16 ? Fp16NonFinite(h) : Bf16NonFinite(h));
  }
  return bad;
}

TEST_P(HalfCastPathTest, NarrowsLikeTheScalarReference) {
  const VectorPath path = GetParam();
  const std::vector<float> x = Inputs();
  ASSERT_EQ(x.size() % 2, 1u);
  for (Precision type : kTypes) {
    for (Rounding rounding : kRoundings) {
      const RoundingMode mode{rounding, 0xfeedull, 5};
      std::vector<uint16_t> want;
      const int64_t want_bad = Reference(type, mode, x, &want);
      ASSERT_GT(want_bad, 1000);  // the random patterns hold many NaNs
      {                           // this test's path
        std::vector<uint16_t> got(x.size(), 0xdead);
        const int64_t bad =
            CastToHalfRange(path, type, mode, x.data(), got.data(), x.size());
        SCOPED_TRACE(::testing::Message()
                     << VectorPathName(path) << " " << PrecisionName(type)
                     << " " << RoundingName(rounding));
        EXPECT_EQ(bad, want_bad);
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(got[i], want[i])
              << "element " << i << " bits " << std::hex << FloatBits(x[i]);
        }
      }
    }
  }
}

TEST_P(HalfCastPathTest, WidensEveryPattern) {
  const VectorPath path = GetParam();
  std::vector<uint16_t> h(0x10000 + 7);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  for (Precision type : kTypes) {
    std::vector<float> got(h.size());
    CastToFloatRange(path, type, h.data(), got.data(), h.size());
    for (size_t i = 0; i < h.size(); ++i) {
      const float want =
          type == Precision::kFp16 ? Fp16ToFloat(h[i]) : Bf16ToFloat(h[i]);
      ASSERT_EQ(FloatBits(got[i]), FloatBits(want))
          << PrecisionName(type) << " " << std::hex << h[i];
    }
  }
}

TEST(HalfCastTest, SplitsAndPiecesGiveTheSameBits) {
  // 2^19 + 3 elements: enough for a 3-thread pool to split.
  std::vector<float> x(((size_t{1} << 19)) + 3);
  uint64_t rng = 7;
  for (float& v : x) {
    v = static_cast<float>(static_cast<int64_t>(SplitMix64Next(rng) >> 40) -
                           (int64_t{1} << 23)) *
        1e-5f;
  }
  x[12345] = 1e6f;  // an fp16 overflow
  HostPool pool(3);
  const VectorPath path = ChosenVectorPath();
  for (Precision type : kTypes) {
    const RoundingMode mode{Rounding::kStochastic, 99, 0};
    std::vector<uint16_t> want(x.size()), split(x.size()), pieces(x.size());
    const int64_t bad =
        CastToHalfRange(path, type, mode, x.data(), want.data(), x.size());
    EXPECT_EQ(bad, type == Precision::kFp16 ? 1 : 0);
    const int64_t jobs = pool.split_jobs();
    EXPECT_EQ(CastToHalfCpuWith(path, pool, type, mode, x.data(), split.data(),
                                x.size()),
              bad);
    EXPECT_GT(pool.split_jobs(), jobs);  // it really was split
    EXPECT_EQ(want, split);
    // In two pieces, the second told where it starts.
    const int64_t cut = 1001;
    int64_t pieces_bad =
        CastToHalfRange(path, type, mode, x.data(), pieces.data(), cut);
    const RoundingMode rest{Rounding::kStochastic, 99, cut};
    pieces_bad += CastToHalfRange(path, type, rest, x.data() + cut,
                                  pieces.data() + cut, x.size() - cut);
    EXPECT_EQ(pieces_bad, bad);
    EXPECT_EQ(want, pieces);
    // Another seed draws other bits.
    std::vector<uint16_t> other(x.size());
    CastToHalfRange(path, type, {Rounding::kStochastic, 100, 0}, x.data(),
                    other.data(), x.size());
    EXPECT_NE(want, other);
    std::vector<float> back(x.size()), back_split(x.size());
    CastToFloatRange(path, type, want.data(), back.data(), x.size());
    CastToFloatCpuWith(path, pool, type, want.data(), back_split.data(),
                       x.size());
    EXPECT_EQ(std::memcmp(back.data(), back_split.data(),
                          back.size() * sizeof(float)),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPath, HalfCastPathTest,
                         ::testing::ValuesIn(kVectorPaths),
                         [](const ::testing::TestParamInfo<VectorPath>& info) {
                           return std::string(VectorPathName(info.param));
                         });

}  // namespace
}  // namespace strata::train
