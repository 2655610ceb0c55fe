// cpu_adam_mixed.cc: the fused mixed-precision Adam pass (AdamMixedUpdateCpu,
// compute.h), one kernel per vector path and per format and rounding; the
// table and dispatch are cpu_adam.cc's.
//
// Built like cpu_adam.cc (-ffp-contract=off, -fno-math-errno): every path
// evaluates g = widen(g16) * grad_scale, w *= decay, then the fp32 kernel's
// operations in its order, all correctly rounded IEEE float operations, so
// the result is bit for bit the fp32 path run on the widened, scaled
// gradient after ScaleCpu(w, decay) — and the CUDA kernel's. The 16-bit
// copy is half_simd.h's narrowing of the new w, equal to half.h's.
#include <cmath>
#include <cstdint>

#include "train/compute/cpu/cpu_adam_kernels.h"
#include "train/compute/cpu/half_simd.h"
#include "train/compute/half.h"

namespace strata::train::adam_kernels {
namespace {

template <bool kFp16>
float Widen(uint16_t h) {
  return kFp16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
}

template <bool kFp16>
uint16_t Narrow(float x, bool stochastic, uint32_t random) {
  return kFp16 ? FloatToFp16(x, stochastic, random)
               : FloatToBf16(x, stochastic, random);
}

bool NonFiniteFloat(float x) {
  return (FloatBits(x) & 0x7f800000u) == 0x7f800000u;
}

// The baseline kernel, and every path's tail.
template <bool kFp16, bool kStochastic>
int64_t MixedScalar(const AdamScalars& s, const MixedScalars& ms, float* w,
                    float* m, float* v, const uint16_t* g, uint16_t* w16,
                    int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = Widen<kFp16>(g[i]) * ms.grad_scale;
    bad += NonFiniteFloat(gi) ? 1 : 0;
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float wi =
        w[i] * ms.decay - s.lr * (mi * s.c1) / (std::sqrt(vi * s.c2) + s.eps);
    w[i] = wi;
    const uint32_t r = kStochastic ? StochasticBits(ms.seed, ms.first + i) : 0;
    w16[i] = Narrow<kFp16>(wi, kStochastic, r);
  }
  return bad;
}

#if defined(__x86_64__)

// AVX2: 8 elements per step, the fp32 AVX2 kernel's operations between
// the widening and the narrowing.
template <bool kFp16, bool kStochastic>
__attribute__((target("avx2,f16c"))) int64_t MixedAvx2Kernel(
    const AdamScalars& s, const MixedScalars& ms, float* w, float* m, float* v,
    const uint16_t* g, uint16_t* w16, int64_t n) {
  const __m256 beta1 = _mm256_set1_ps(s.beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 lr = _mm256_set1_ps(s.lr);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 c1 = _mm256_set1_ps(s.c1);
  const __m256 c2 = _mm256_set1_ps(s.c2);
  const __m256 gscale = _mm256_set1_ps(ms.grad_scale);
  const __m256 decay = _mm256_set1_ps(ms.decay);
  const __m256i exp = _mm256_set1_epi32(0x7f800000);
  alignas(32) uint32_t bits[8] = {};
  int64_t bad = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_mul_ps(
        simd::HalfToFloatx8<kFp16>(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + i))),
        gscale);
    const __m256i ge = _mm256_and_si256(_mm256_castps_si256(gi), exp);
    bad += __builtin_popcount(static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(ge, exp)))));
    const __m256 mi = _mm256_add_ps(
        _mm256_mul_ps(beta1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, gi));
    const __m256 vi =
        _mm256_add_ps(_mm256_mul_ps(beta2, _mm256_loadu_ps(v + i)),
                      _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom =
        _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vi, c2)), eps);
    const __m256 step =
        _mm256_div_ps(_mm256_mul_ps(lr, _mm256_mul_ps(mi, c1)), denom);
    const __m256 wi =
        _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), decay), step);
    _mm256_storeu_ps(w + i, wi);
    if (kStochastic) simd::FillStochasticBits(ms.seed, ms.first + i, 8, bits);
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(w16 + i),
        simd::FloatToHalfx8<kFp16>(
            wi, kStochastic,
            _mm256_load_si256(reinterpret_cast<const __m256i*>(bits))));
  }
  MixedScalars tail = ms;
  tail.first += i;
  return bad + MixedScalar<kFp16, kStochastic>(s, tail, w + i, m + i, v + i,
                                               g + i, w16 + i, n - i);
}

// AVX-512F: 16 elements per step, likewise.
template <bool kFp16, bool kStochastic>
__attribute__((target("avx512f"))) int64_t MixedAvx512Kernel(
    const AdamScalars& s, const MixedScalars& ms, float* w, float* m, float* v,
    const uint16_t* g, uint16_t* w16, int64_t n) {
  const __m512 beta1 = _mm512_set1_ps(s.beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2);
  const __m512 omb1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 omb2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 lr = _mm512_set1_ps(s.lr);
  const __m512 eps = _mm512_set1_ps(s.eps);
  const __m512 c1 = _mm512_set1_ps(s.c1);
  const __m512 c2 = _mm512_set1_ps(s.c2);
  const __m512 gscale = _mm512_set1_ps(ms.grad_scale);
  const __m512 decay = _mm512_set1_ps(ms.decay);
  const __m512i exp = _mm512_set1_epi32(0x7f800000);
  alignas(64) uint32_t bits[16] = {};
  int64_t bad = 0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 gi = _mm512_mul_ps(
        simd::HalfToFloatx16<kFp16>(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i))),
        gscale);
    bad += __builtin_popcount(static_cast<unsigned>(_mm512_cmpeq_epi32_mask(
        _mm512_and_si512(_mm512_castps_si512(gi), exp), exp)));
    const __m512 mi = _mm512_add_ps(
        _mm512_mul_ps(beta1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, gi));
    const __m512 vi =
        _mm512_add_ps(_mm512_mul_ps(beta2, _mm512_loadu_ps(v + i)),
                      _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    const __m512 denom = _mm512_add_ps(
        _mm512_maskz_sqrt_ps(__mmask16(0xffff), _mm512_mul_ps(vi, c2)), eps);
    const __m512 step =
        _mm512_div_ps(_mm512_mul_ps(lr, _mm512_mul_ps(mi, c1)), denom);
    const __m512 wi =
        _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(w + i), decay), step);
    _mm512_storeu_ps(w + i, wi);
    if (kStochastic) simd::FillStochasticBits(ms.seed, ms.first + i, 16, bits);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(w16 + i),
        simd::FloatToHalfx16<kFp16>(wi, kStochastic, _mm512_load_si512(bits)));
  }
  MixedScalars tail = ms;
  tail.first += i;
  return bad + MixedScalar<kFp16, kStochastic>(s, tail, w + i, m + i, v + i,
                                               g + i, w16 + i, n - i);
}

#endif  // __x86_64__

}  // namespace

MixedKernels MixedBaseline() {
  return {MixedScalar<false, false>, MixedScalar<false, true>,
          MixedScalar<true, false>, MixedScalar<true, true>};
}

#if defined(__x86_64__)
MixedKernels MixedAvx2() {
  return {MixedAvx2Kernel<false, false>, MixedAvx2Kernel<false, true>,
          MixedAvx2Kernel<true, false>, MixedAvx2Kernel<true, true>};
}

MixedKernels MixedAvx512() {
  return {MixedAvx512Kernel<false, false>, MixedAvx512Kernel<false, true>,
          MixedAvx512Kernel<true, false>, MixedAvx512Kernel<true, true>};
}
#else
MixedKernels MixedAvx2() { return MixedBaseline(); }
MixedKernels MixedAvx512() { return MixedBaseline(); }
#endif

}  // namespace strata::train::adam_kernels
