// cpu_adam.cc: AdamUpdateCpu, the host Adam update that the CUDA kernel must
// match bit for bit, one kernel per vector path (see cpu_adam.h).
//
// The build compiles this file with -ffp-contract=off: no multiply-add is
// fused, not in the loops the compiler vectorises and not in the intrinsics
// (GCC treats _mm256_mul_ps + _mm256_add_ps as plain vector arithmetic that it
// would otherwise contract where FMA is enabled, as under AVX-512), matching
// the GPU kernel's --fmad=false and _rn intrinsics; and -fno-math-errno, so
// the baseline loop's std::sqrt becomes one sqrtps. Every path evaluates the
// same correctly rounded IEEE float operations (mul, add, sub, div, sqrt) in
// the order compute.h documents, on the default rounding mode with denormals
// kept (nothing sets FTZ/DAZ), so the lanes of any width, the scalar tails,
// any thread split and the GPU all give the same bits.
#include "train/compute/cpu/cpu_adam.h"

#include <atomic>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "train/compute/cpu/cpu_adam_kernels.h"

namespace strata::train {
namespace {

using adam_kernels::AdamScalars;
using adam_kernels::Hoist;
using adam_kernels::MixedKernel;
using adam_kernels::MixedKernels;
using adam_kernels::MixedScalars;

// The baseline kernel, and every path's tail: the formula of compute.h one
// element at a time, which the compiler vectorises for the build's baseline
// ISA (SSE2 on x86-64) without reordering anything.
void AdamBaseline(const AdamScalars& s, float* w, float* m, float* v,
                  const float* g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] - s.lr * (mi * s.c1) / (std::sqrt(vi * s.c2) + s.eps);
  }
}

#if defined(__x86_64__)

// AVX2: 8 floats per vector, two vectors (one cache line of each array) per
// iteration; each intrinsic is the same single IEEE operation as the
// baseline's, in the same order.
__attribute__((target("avx2"))) void AdamAvx2(const AdamScalars& s, float* w,
                                              float* m, float* v,
                                              const float* g, int64_t n) {
  const __m256 beta1 = _mm256_set1_ps(s.beta1);
  const __m256 beta2 = _mm256_set1_ps(s.beta2);
  const __m256 omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 lr = _mm256_set1_ps(s.lr);
  const __m256 eps = _mm256_set1_ps(s.eps);
  const __m256 c1 = _mm256_set1_ps(s.c1);
  const __m256 c2 = _mm256_set1_ps(s.c2);
  constexpr int64_t kStep = 16;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    for (int64_t j = i; j < i + kStep; j += 8) {
      const __m256 gj = _mm256_loadu_ps(g + j);
      const __m256 mj =
          _mm256_add_ps(_mm256_mul_ps(beta1, _mm256_loadu_ps(m + j)),
                        _mm256_mul_ps(omb1, gj));
      const __m256 vj =
          _mm256_add_ps(_mm256_mul_ps(beta2, _mm256_loadu_ps(v + j)),
                        _mm256_mul_ps(_mm256_mul_ps(omb2, gj), gj));
      _mm256_storeu_ps(m + j, mj);
      _mm256_storeu_ps(v + j, vj);
      const __m256 denom =
          _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vj, c2)), eps);
      const __m256 step =
          _mm256_div_ps(_mm256_mul_ps(lr, _mm256_mul_ps(mj, c1)), denom);
      _mm256_storeu_ps(w + j, _mm256_sub_ps(_mm256_loadu_ps(w + j), step));
    }
  }
  AdamBaseline(s, w + i, m + i, v + i, g + i, n - i);
}

// AVX-512F: 16 floats per vector, one cache line of each array per
// iteration; the same operations in the same order.
__attribute__((target("avx512f"))) void AdamAvx512(const AdamScalars& s,
                                                   float* w, float* m, float* v,
                                                   const float* g, int64_t n) {
  const __m512 beta1 = _mm512_set1_ps(s.beta1);
  const __m512 beta2 = _mm512_set1_ps(s.beta2);
  const __m512 omb1 = _mm512_set1_ps(s.one_minus_beta1);
  const __m512 omb2 = _mm512_set1_ps(s.one_minus_beta2);
  const __m512 lr = _mm512_set1_ps(s.lr);
  const __m512 eps = _mm512_set1_ps(s.eps);
  const __m512 c1 = _mm512_set1_ps(s.c1);
  const __m512 c2 = _mm512_set1_ps(s.c2);
  constexpr int64_t kStep = 16;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    const __m512 gi = _mm512_loadu_ps(g + i);
    const __m512 mi = _mm512_add_ps(
        _mm512_mul_ps(beta1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, gi));
    const __m512 vi =
        _mm512_add_ps(_mm512_mul_ps(beta2, _mm512_loadu_ps(v + i)),
                      _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    // The all-lanes masked form is the same vsqrtps; GCC 12's plain
    // _mm512_sqrt_ps trips -Wmaybe-uninitialized on its unused pass-through.
    const __m512 denom = _mm512_add_ps(
        _mm512_maskz_sqrt_ps(__mmask16(0xffff), _mm512_mul_ps(vi, c2)), eps);
    const __m512 step =
        _mm512_div_ps(_mm512_mul_ps(lr, _mm512_mul_ps(mi, c1)), denom);
    _mm512_storeu_ps(w + i, _mm512_sub_ps(_mm512_loadu_ps(w + i), step));
  }
  AdamBaseline(s, w + i, m + i, v + i, g + i, n - i);
}

#endif  // __x86_64__

using AdamKernel = void (*)(const AdamScalars& s, float* w, float* m, float* v,
                            const float* g, int64_t n);

// One vector path's host Adam kernels: the fp32 update and the fused
// mixed-precision pass (cpu_adam_mixed.cc), by format and rounding.
struct AdamKernels {
  AdamKernel fp32;
  MixedKernels mixed;
};

AdamKernels KernelsFor(VectorPath path) {
  switch (path) {
    case VectorPath::kBaseline:
      return {AdamBaseline, adam_kernels::MixedBaseline()};
#if defined(__x86_64__)
    case VectorPath::kAvx2:
      return {AdamAvx2, adam_kernels::MixedAvx2()};
    case VectorPath::kAvx512:
      return {AdamAvx512, adam_kernels::MixedAvx512()};
#else
    default:
      break;
#endif
  }
  return {AdamBaseline, adam_kernels::MixedBaseline()};
}

MixedKernel MixedKernelFor(VectorPath path, const MixedAdamParams& mp) {
  const MixedKernels k = KernelsFor(path).mixed;
  const bool sr = mp.rounding.rounding == Rounding::kStochastic;
  if (mp.type == Precision::kFp16) {
    return sr ? k.fp16_stochastic : k.fp16_nearest;
  }
  return sr ? k.bf16_stochastic : k.bf16_nearest;
}

MixedScalars MixedHoist(const MixedAdamParams& mp) {
  return {mp.grad_scale, mp.decay, mp.rounding.seed,
          static_cast<uint64_t>(mp.rounding.first_index)};
}

}  // namespace

void AdamRange(VectorPath path, const AdamParams& p, float* w, float* m,
               float* v, const float* g, int64_t n) {
  if (n <= 0) return;
  KernelsFor(path).fp32(Hoist(p), w, m, v, g, n);
}

void AdamUpdateCpuWith(VectorPath path, HostPool& pool, const AdamParams& p,
                       float* w, float* m, float* v, const float* g,
                       int64_t n) {
  if (n <= 0) return;
  const AdamKernel kernel = KernelsFor(path).fp32;
  const AdamScalars s = Hoist(p);
  // Elementwise, so how [0, n) is split cannot change any result.
  pool.ParallelFor(n, kAdamMinElementsPerThread, kAdamSplitAlignElements,
                   [&](int64_t begin, int64_t end) {
                     kernel(s, w + begin, m + begin, v + begin, g + begin,
                            end - begin);
                   });
}

void AdamUpdateCpu(const AdamParams& p, float* w, float* m, float* v,
                   const float* g, int64_t n) {
  static const VectorPath path = ChosenVectorPath();
  AdamUpdateCpuWith(path, HostPool::Shared(), p, w, m, v, g, n);
}

int64_t AdamMixedRange(VectorPath path, const AdamParams& p,
                       const MixedAdamParams& mp, float* w, float* m, float* v,
                       const uint16_t* g, uint16_t* w16, int64_t n) {
  if (n <= 0) return 0;
  return MixedKernelFor(path, mp)(Hoist(p), MixedHoist(mp), w, m, v, g, w16, n);
}

int64_t AdamMixedUpdateCpuWith(VectorPath path, HostPool& pool,
                               const AdamParams& p, const MixedAdamParams& mp,
                               float* w, float* m, float* v, const uint16_t* g,
                               uint16_t* w16, int64_t n) {
  if (n <= 0) return 0;
  const MixedKernel kernel = MixedKernelFor(path, mp);
  const AdamScalars s = Hoist(p);
  const MixedScalars ms = MixedHoist(mp);
  std::atomic<int64_t> bad{0};
  // Elementwise, and each element's stochastic bits depend on its index
  // alone, so the split cannot change a bit.
  pool.ParallelFor(n, kAdamMinElementsPerThread, kAdamSplitAlignElements,
                   [&](int64_t begin, int64_t end) {
                     MixedScalars range = ms;
                     range.first += static_cast<uint64_t>(begin);
                     bad.fetch_add(
                         kernel(s, range, w + begin, m + begin, v + begin,
                                g + begin, w16 + begin, end - begin),
                         std::memory_order_relaxed);
                   });
  return bad.load(std::memory_order_relaxed);
}

int64_t AdamMixedUpdateCpu(const AdamParams& p, const MixedAdamParams& mp,
                           float* w, float* m, float* v, const uint16_t* g,
                           uint16_t* w16, int64_t n) {
  static const VectorPath path = ChosenVectorPath();
  return AdamMixedUpdateCpuWith(path, HostPool::Shared(), p, mp, w, m, v, g,
                                w16, n);
}

}  // namespace strata::train
