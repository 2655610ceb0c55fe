// half_cast.cc: the host casts of half_cast.h, one kernel per vector path,
// each a template over the format and the rounding so the inner loop has
// no branches on either.
#include "train/compute/cpu/half_cast.h"

#include <atomic>
#include <cstdint>

#include "train/compute/cpu/half_simd.h"
#include "train/compute/half.h"

namespace strata::train {
namespace {

template <bool kFp16>
uint16_t Narrow(float x, bool stochastic, uint32_t random) {
  return kFp16 ? FloatToFp16(x, stochastic, random)
               : FloatToBf16(x, stochastic, random);
}

template <bool kFp16>
bool NonFinite(uint16_t h) {
  return kFp16 ? Fp16NonFinite(h) : Bf16NonFinite(h);
}

// The baseline kernel, and every path's tail: half.h one element at a time.
template <bool kFp16, bool kStochastic>
int64_t NarrowBaseline(const float* src, uint16_t* dst, int64_t n,
                       uint64_t seed, uint64_t first) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = kStochastic ? StochasticBits(seed, first + i) : 0u;
    dst[i] = Narrow<kFp16>(src[i], kStochastic, r);
    bad += NonFinite<kFp16>(dst[i]) ? 1 : 0;
  }
  return bad;
}

template <bool kFp16>
void WidenBaseline(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = kFp16 ? Fp16ToFloat(src[i]) : Bf16ToFloat(src[i]);
  }
}

#if defined(__x86_64__)

template <bool kFp16, bool kStochastic>
__attribute__((target("avx2,f16c"))) int64_t NarrowAvx2(
    const float* src, uint16_t* dst, int64_t n, uint64_t seed, uint64_t first) {
  int64_t bad = 0;
  int64_t i = 0;
  alignas(32) uint32_t bits[8] = {};
  for (; i + 8 <= n; i += 8) {
    if (kStochastic) simd::FillStochasticBits(seed, first + i, 8, bits);
    const __m128i h = simd::FloatToHalfx8<kFp16>(
        _mm256_loadu_ps(src + i), kStochastic,
        _mm256_load_si256(reinterpret_cast<const __m256i*>(bits)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    bad += simd::NonFinite16x8<kFp16>(h);
  }
  return bad + NarrowBaseline<kFp16, kStochastic>(src + i, dst + i, n - i, seed,
                                                  first + i);
}

template <bool kFp16>
__attribute__((target("avx2,f16c"))) void WidenAvx2(const uint16_t* src,
                                                    float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, simd::HalfToFloatx8<kFp16>(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(src + i))));
  }
  WidenBaseline<kFp16>(src + i, dst + i, n - i);
}

template <bool kFp16, bool kStochastic>
__attribute__((target("avx512f"))) int64_t NarrowAvx512(
    const float* src, uint16_t* dst, int64_t n, uint64_t seed, uint64_t first) {
  int64_t bad = 0;
  int64_t i = 0;
  alignas(64) uint32_t bits[16] = {};
  for (; i + 16 <= n; i += 16) {
    if (kStochastic) simd::FillStochasticBits(seed, first + i, 16, bits);
    const __m256i h = simd::FloatToHalfx16<kFp16>(
        _mm512_loadu_ps(src + i), kStochastic, _mm512_load_si512(bits));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
    bad += simd::NonFinite16x16<kFp16>(h);
  }
  return bad + NarrowBaseline<kFp16, kStochastic>(src + i, dst + i, n - i, seed,
                                                  first + i);
}

template <bool kFp16>
__attribute__((target("avx512f"))) void WidenAvx512(const uint16_t* src,
                                                    float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(dst + i, simd::HalfToFloatx16<kFp16>(_mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(src + i))));
  }
  WidenBaseline<kFp16>(src + i, dst + i, n - i);
}

#endif  // __x86_64__

using NarrowKernel = int64_t (*)(const float*, uint16_t*, int64_t, uint64_t,
                                 uint64_t);
using WidenKernel = void (*)(const uint16_t*, float*, int64_t);

// One path's kernels for one format.
struct CastKernels {
  NarrowKernel nearest, stochastic;
  WidenKernel widen;
};

template <bool kFp16>
CastKernels KernelsOf(VectorPath path) {
  switch (path) {
#if defined(__x86_64__)
    case VectorPath::kAvx2:
      return {NarrowAvx2<kFp16, false>, NarrowAvx2<kFp16, true>,
              WidenAvx2<kFp16>};
    case VectorPath::kAvx512:
      return {NarrowAvx512<kFp16, false>, NarrowAvx512<kFp16, true>,
              WidenAvx512<kFp16>};
#endif
    default:
      return {NarrowBaseline<kFp16, false>, NarrowBaseline<kFp16, true>,
              WidenBaseline<kFp16>};
  }
}

CastKernels KernelsFor(VectorPath path, Precision type) {
  return type == Precision::kFp16 ? KernelsOf<true>(path)
                                  : KernelsOf<false>(path);
}

NarrowKernel NarrowFor(VectorPath path, Precision type, Rounding rounding) {
  const CastKernels k = KernelsFor(path, type);
  return rounding == Rounding::kStochastic ? k.stochastic : k.nearest;
}

}  // namespace

int64_t CastToHalfRange(VectorPath path, Precision type,
                        const RoundingMode& mode, const float* src,
                        uint16_t* dst, int64_t n) {
  if (n <= 0) return 0;
  return NarrowFor(path, type, mode.rounding)(
      src, dst, n, mode.seed, static_cast<uint64_t>(mode.first_index));
}

void CastToFloatRange(VectorPath path, Precision type, const uint16_t* src,
                      float* dst, int64_t n) {
  if (n <= 0) return;
  KernelsFor(path, type).widen(src, dst, n);
}

int64_t CastToHalfCpuWith(VectorPath path, HostPool& pool, Precision type,
                          const RoundingMode& mode, const float* src,
                          uint16_t* dst, int64_t n) {
  if (n <= 0) return 0;
  const NarrowKernel kernel = NarrowFor(path, type, mode.rounding);
  const uint64_t first = static_cast<uint64_t>(mode.first_index);
  std::atomic<int64_t> bad{0};
  // Elementwise, and each element's random bits depend on its index only,
  // so the split cannot change a bit.
  pool.ParallelFor(n, kCastMinElementsPerThread, 16,
                   [&](int64_t begin, int64_t end) {
                     bad.fetch_add(kernel(src + begin, dst + begin, end - begin,
                                          mode.seed, first + begin),
                                   std::memory_order_relaxed);
                   });
  return bad.load(std::memory_order_relaxed);
}

void CastToFloatCpuWith(VectorPath path, HostPool& pool, Precision type,
                        const uint16_t* src, float* dst, int64_t n) {
  if (n <= 0) return;
  const WidenKernel kernel = KernelsFor(path, type).widen;
  pool.ParallelFor(n, kCastMinElementsPerThread, 16,
                   [&](int64_t begin, int64_t end) {
                     kernel(src + begin, dst + begin, end - begin);
                   });
}

int64_t CastToHalfCpu(Precision type, const RoundingMode& mode,
                      const float* src, uint16_t* dst, int64_t n) {
  static const VectorPath path = ChosenVectorPath();
  return CastToHalfCpuWith(path, HostPool::Shared(), type, mode, src, dst, n);
}

void CastToFloatCpu(Precision type, const uint16_t* src, float* dst,
                    int64_t n) {
  static const VectorPath path = ChosenVectorPath();
  CastToFloatCpuWith(path, HostPool::Shared(), type, src, dst, n);
}

}  // namespace strata::train
