// precision_gpu_test.cc: CudaCompute's mixed-precision operations against
// CpuCompute's on the same inputs: the casts (both formats, both roundings)
// and the fused Adam pass bit for bit, with equal non-finite counts; every
// 16-bit pattern widened alike; the 16-bit linear layers (cuBLAS GemmEx
// with fp32 accumulation against the CPU's tiled sgemm over the same 16-bit
// values) within the fp32 summation error, accumulation included. Skips
// (never passes silently) where MakeCudaCompute fails: no GPU, or a build
// without CUDA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "base/splitmix64.h"
#include "gtest/gtest.h"
#include "tests/util/compute_gpu_test_util.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/compute.h"
#include "train/compute/half.h"

namespace strata::train {
namespace {

using ::strata::train::testing::DeviceArray;
using ::strata::train::testing::ExpectCloseToMax;
using ::strata::train::testing::Random;
using ::strata::train::testing::SameBits;

constexpr Precision kTypes[] = {Precision::kBf16, Precision::kFp16};

// f rounded to `type` (nearest even).
std::vector<uint16_t> ToHalf(Precision type, const std::vector<float>& f) {
  std::vector<uint16_t> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    h[i] = type == Precision::kFp16 ? FloatToFp16(f[i]) : FloatToBf16(f[i]);
  }
  return h;
}

class PrecisionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = MakeCudaCompute();
    if (!gpu.ok()) GTEST_SKIP() << "no CUDA compute: " << gpu.status();
    gpu_ = std::move(*gpu);
  }
  std::unique_ptr<Compute> cpu_ = MakeCpuCompute();
  std::unique_ptr<Compute> gpu_;
};

// Random bit patterns (NaNs, infinities, subnormals) and ordinary values,
// an odd count.
std::vector<float> CastInputs() {
  std::vector<float> x = Random(40001, 3, 70000.0f);  // fp16 overflows too
  uint64_t rng = 5;
  for (int i = 0; i < 40000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(SplitMix64Next(rng));
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    x.push_back(f);
  }
  return x;
}

TEST_F(PrecisionGpuTest, CastsMatchTheCpuBitForBit) {
  const std::vector<float> x = CastInputs();
  DeviceArray<float> dx(x);
  for (Precision type : kTypes) {
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
      const RoundingMode mode{r, 1234, 17};
      std::vector<uint16_t> want(x.size());
      ASSERT_TRUE(
          cpu_->CastToHalf(type, mode, x.data(), want.data(), x.size()).ok());
      DeviceArray<uint16_t> dh(std::vector<uint16_t>(x.size(), 0xdead));
      ASSERT_TRUE(
          gpu_->CastToHalf(type, mode, dx.get(), dh.get(), x.size()).ok());
      EXPECT_EQ(*gpu_->TakeNonFinite(), *cpu_->TakeNonFinite());
      EXPECT_EQ(dh.ToHost(), want) << PrecisionName(type) << RoundingName(r);
    }
  }
}

TEST_F(PrecisionGpuTest, EveryPatternWidensAlike) {
  std::vector<uint16_t> h(0x10000);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  DeviceArray<uint16_t> dh(h);
  for (Precision type : kTypes) {
    std::vector<float> want(h.size());
    ASSERT_TRUE(cpu_->CastToFloat(type, h.data(), want.data(), h.size()).ok());
    DeviceArray<float> df(std::vector<float>(h.size()));
    ASSERT_TRUE(gpu_->CastToFloat(type, dh.get(), df.get(), h.size()).ok());
    EXPECT_TRUE(SameBits(df.ToHost(), want)) << PrecisionName(type);
  }
}

TEST_F(PrecisionGpuTest, FusedAdamMatchesTheCpuBitForBit) {
  constexpr int64_t kN = 100003;
  AdamParams p;
  p.correction1 = 1.0f / (1.0f - 0.9f);
  p.correction2 = 1.0f / (1.0f - 0.999f);
  for (Precision type : kTypes) {
    for (Rounding r : {Rounding::kNearestEven, Rounding::kStochastic}) {
      const MixedAdamParams mp{type, 0.5f / 256.0f, 1.0f - 1e-4f, {r, 8, 0}};
      std::vector<float> w = Random(kN, 1), m = Random(kN, 2, 0.1f),
                         v = Random(kN, 3, 0.01f);
      for (float& x : v) x = std::abs(x);
      std::vector<uint16_t> g(kN), w16(kN, 0);
      const std::vector<float> g32 = Random(kN, 4, 100.0f);
      for (int64_t i = 0; i < kN; ++i) {
        g[i] = type == Precision::kFp16 ? FloatToFp16(g32[i])
                                        : FloatToBf16(g32[i]);
      }
      DeviceArray<float> dw(w), dm(m), dv(v);
      DeviceArray<uint16_t> dg(g), dw16(w16);
      ASSERT_TRUE(cpu_->AdamMixed(p, mp, w.data(), m.data(), v.data(), g.data(),
                                  w16.data(), kN)
                      .ok());
      ASSERT_TRUE(gpu_->AdamMixed(p, mp, dw.get(), dm.get(), dv.get(), dg.get(),
                                  dw16.get(), kN)
                      .ok());
      EXPECT_EQ(*gpu_->TakeNonFinite(), 0);
      SCOPED_TRACE(::testing::Message()
                   << PrecisionName(type) << " " << RoundingName(r));
      EXPECT_TRUE(SameBits(dw.ToHost(), w));
      EXPECT_TRUE(SameBits(dm.ToHost(), m));
      EXPECT_TRUE(SameBits(dv.ToHost(), v));
      EXPECT_EQ(dw16.ToHost(), w16);
    }
  }
}

// Non-finite gradients are counted alike (their results are NaN on both,
// but x86 and CUDA spell a new NaN differently, so no bits are compared).
TEST_F(PrecisionGpuTest, FusedAdamCountsNonFiniteGradients) {
  std::vector<float> w(40, 0.5f), m(40, 0.0f), v(40, 0.0f);
  std::vector<uint16_t> g(40, 0x3c00), w16(40);
  g[3] = 0x7c00;
  g[39] = 0xfe00;
  DeviceArray<float> dw(w), dm(m), dv(v);
  DeviceArray<uint16_t> dg(g), dw16(w16);
  const MixedAdamParams mp{Precision::kFp16};
  ASSERT_TRUE(gpu_->AdamMixed(AdamParams{}, mp, dw.get(), dm.get(), dv.get(),
                              dg.get(), dw16.get(), 40)
                  .ok());
  EXPECT_EQ(*gpu_->TakeNonFinite(), 2);
  EXPECT_EQ(*gpu_->TakeNonFinite(), 0);
}

TEST_F(PrecisionGpuTest, LinearLayersMatchTheCpu) {
  constexpr int64_t kBatch = 33, kIn = 130, kOut = 70;
  for (Precision type : kTypes) {
    const auto to16 = [type](const std::vector<float>& f) {
      return ToHalf(type, f);
    };
    const auto x = Random(kBatch * kIn, 1);
    const auto w = to16(Random(kOut * kIn, 2, 0.1f));
    const auto b = to16(Random(kOut, 3));
    const auto dy = Random(kBatch * kOut, 4, 0.01f);
    DeviceArray<float> gx(x), gdy(dy);
    DeviceArray<uint16_t> gw(w), gb(b);
    std::vector<float> y(kBatch * kOut), dw(kOut * kIn), db(kOut),
        dx(kBatch * kIn);
    ASSERT_TRUE(cpu_->LinearForward16(type, x.data(), w.data(), b.data(),
                                      y.data(), kBatch, kIn, kOut)
                    .ok());
    DeviceArray<float> gy(std::vector<float>(y.size(), std::nanf("")));
    ASSERT_TRUE(gpu_->LinearForward16(type, gx.get(), gw.get(), gb.get(),
                                      gy.get(), kBatch, kIn, kOut)
                    .ok());
    ExpectCloseToMax(gy.ToHost(), y, 1e-5, "y");
    // Two micro-batches accumulated.
    DeviceArray<float> gdw(std::vector<float>(dw.size(), 0.0f)),
        gdb(std::vector<float>(db.size(), 0.0f)), gdx(dx);
    for (int micro = 0; micro < 2; ++micro) {
      ASSERT_TRUE(cpu_->LinearBackward16(type, x.data(), w.data(), dy.data(),
                                         dw.data(), db.data(), dx.data(),
                                         kBatch, kIn, kOut, micro > 0)
                      .ok());
      ASSERT_TRUE(gpu_->LinearBackward16(type, gx.get(), gw.get(), gdy.get(),
                                         gdw.get(), gdb.get(), gdx.get(),
                                         kBatch, kIn, kOut, micro > 0)
                      .ok());
    }
    ExpectCloseToMax(gdw.ToHost(), dw, 1e-5, "dw");
    EXPECT_TRUE(SameBits(gdb.ToHost(), db));  // the same row order and adds
    ExpectCloseToMax(gdx.ToHost(), dx, 1e-5, "dx");
  }
}

TEST_F(PrecisionGpuTest, ClassifierAndEmbeddingMatchTheCpu) {
  // The GPT's 16-bit paths: the bias-free tied classifier and the gather
  // from 16-bit tables.
  constexpr int64_t B = 2, T = 9, C = 48, V = 130;
  for (Precision type : kTypes) {
    const auto to16 = [type](const std::vector<float>& f) {
      return ToHalf(type, f);
    };
    const auto wte = to16(Random(V * C, 5, 0.1f));
    const auto wpe = to16(Random(T * C, 6, 0.1f));
    std::vector<int32_t> tokens(B * T);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (5 * i + 1) % V;
    std::vector<float> x(B * T * C);
    ASSERT_TRUE(cpu_->EmbeddingForward16(type, tokens.data(), wte.data(),
                                         wpe.data(), x.data(), B, T, C, V)
                    .ok());
    DeviceArray<int32_t> gt(tokens);
    DeviceArray<uint16_t> gwte(wte), gwpe(wpe);
    DeviceArray<float> gx(std::vector<float>(x.size(), std::nanf("")));
    ASSERT_TRUE(gpu_->EmbeddingForward16(type, gt.get(), gwte.get(), gwpe.get(),
                                         gx.get(), B, T, C, V)
                    .ok());
    EXPECT_TRUE(SameBits(gx.ToHost(), x));  // one exact add per element
    std::vector<float> z(B * T * V), dx(B * T * C), dw(V * C);
    ASSERT_TRUE(cpu_->LinearForward16(type, x.data(), wte.data(), nullptr,
                                      z.data(), B * T, C, V)
                    .ok());
    DeviceArray<float> gz(std::vector<float>(z.size(), std::nanf("")));
    ASSERT_TRUE(gpu_->LinearForward16(type, gx.get(), gwte.get(), nullptr,
                                      gz.get(), B * T, C, V)
                    .ok());
    ExpectCloseToMax(gz.ToHost(), z, 1e-5, "logits");
    ASSERT_TRUE(cpu_->LinearBackward16(type, x.data(), wte.data(), z.data(),
                                       dw.data(), nullptr, dx.data(), B * T, C,
                                       V, false)
                    .ok());
    DeviceArray<float> gdw(dw), gdx(dx);
    ASSERT_TRUE(gpu_->LinearBackward16(type, gx.get(), gwte.get(), gz.get(),
                                       gdw.get(), nullptr, gdx.get(), B * T, C,
                                       V, false)
                    .ok());
    ExpectCloseToMax(gdw.ToHost(), dw, 1e-4, "dwte");
    ExpectCloseToMax(gdx.ToHost(), dx, 1e-4, "dx");
  }
}

}  // namespace
}  // namespace strata::train
