// half_simd.h: half.h's conversions on 8 (AVX2) and 16 (AVX-512F) floats
// at a time, for the host kernels that cast (half_cast.cc) and the fused
// Adam pass (cpu_adam_mixed.cc). Internal to train/; x86-64 only. Each
// function carries the target attribute of its path, so it inlines into
// kernels built for that path and never runs on a CPU without it.
//
// Same bits as half.h: fp16 stochastic narrowing spells RoundShifted's
// integer steps lane by lane (vpsrlvd/vpsllvd give 0 for shifts of 32 or
// more, as half.h's ShiftRight/ShiftLeft do); bf16 uses its one-add form
// (FloatToBf16x8 says why it is the same); fp16 round to nearest even is
// one F16C/AVX-512 vcvtps2ph, whose NaN and overflow handling is what
// half.h copies. The tests check every path against half.h. Widening is exact
// everywhere (fp16: vcvtph2ps; bf16: a shift).
#ifndef STRATA_TRAIN_COMPUTE_CPU_HALF_SIMD_H_
#define STRATA_TRAIN_COMPUTE_CPU_HALF_SIMD_H_

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "train/compute/half.h"

namespace strata::train::simd {

#define STRATA_AVX2 __attribute__((target("avx2,f16c"), always_inline)) inline
#define STRATA_AVX512 __attribute__((target("avx512f"), always_inline)) inline

// ---- AVX2: 8 lanes

// RoundShifted (half.h) on 8 lanes.
STRATA_AVX2 __m256i RoundShifted8(__m256i mag, __m256i shift, bool stochastic,
                                  __m256i random) {
  const __m256i k32 = _mm256_set1_epi32(32);
  const __m256i kept = _mm256_srlv_epi32(mag, shift);
  const __m256i frac =
      _mm256_or_si256(_mm256_sllv_epi32(mag, _mm256_sub_epi32(k32, shift)),
                      _mm256_srlv_epi32(mag, _mm256_sub_epi32(shift, k32)));
  const __m256i limit =
      stochastic
          ? _mm256_xor_si256(random, _mm256_set1_epi32(-1))
          : _mm256_sub_epi32(_mm256_set1_epi32(int32_t(0x80000000u)),
                             _mm256_and_si256(kept, _mm256_set1_epi32(1)));
  // Unsigned frac > limit as a signed compare with both sign bits flipped.
  const __m256i flip = _mm256_set1_epi32(int32_t(0x80000000u));
  const __m256i up = _mm256_cmpgt_epi32(_mm256_xor_si256(frac, flip),
                                        _mm256_xor_si256(limit, flip));
  return _mm256_sub_epi32(kept, up);  // up is -1 where true
}

// Eight 32-bit lanes, each < 2^16, to eight 16-bit values.
STRATA_AVX2 __m128i Pack16x8(__m256i r) {
  return _mm256_castsi256_si128(
      _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}

// bf16's fixed shift of 16 lets RoundShifted shrink to one add: nearest
// even adds 0x7fff plus the kept value's low bit, stochastic adds the top
// 16 random bits, and the carry out of the low half is the rounding (the
// same carries as RoundShifted's: its fraction is the low half times 2^16,
// and the random bits' low half cannot change the carry of a sum whose
// other low half is zero). Applied to the signed bits: no finite value
// carries into the sign.
STRATA_AVX2 __m128i FloatToBf16x8(__m256 x, bool stochastic, __m256i random) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i high = _mm256_srli_epi32(u, 16);
  const __m256i add =
      stochastic
          ? _mm256_srli_epi32(random, 16)
          : _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                             _mm256_and_si256(high, _mm256_set1_epi32(1)));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, add), 16);
  const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(high, _mm256_set1_epi32(0x40)),
                         nan);
  return Pack16x8(r);
}

// FloatToFp16 (half.h) on 8 lanes: F16C for nearest even, the integer
// steps for stochastic rounding.
STRATA_AVX2 __m128i FloatToFp16x8(__m256 x, bool stochastic, __m256i random) {
  if (!stochastic) {
    return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  const __m256i u = _mm256_castps_si256(x);
  const __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i sign =
      _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000));
  const __m256i normal = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x387fffff));
  const __m256i e = _mm256_srli_epi32(mag, 23);
  const __m256i implicit =
      _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                          _mm256_set1_epi32(0x800000));
  const __m256i m = _mm256_or_si256(
      _mm256_and_si256(mag, _mm256_set1_epi32(0x7fffff)), implicit);
  const __m256i sub_shift = _mm256_sub_epi32(
      _mm256_set1_epi32(126), _mm256_max_epi32(e, _mm256_set1_epi32(1)));
  const __m256i mg = _mm256_blendv_epi8(
      m, _mm256_sub_epi32(mag, _mm256_set1_epi32(0x38000000)), normal);
  const __m256i sh =
      _mm256_blendv_epi8(sub_shift, _mm256_set1_epi32(13), normal);
  __m256i r = RoundShifted8(mg, sh, true, random);
  const __m256i big = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x477fffff));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7c00), big);
  const __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
  const __m256i nan_bits = _mm256_or_si256(
      _mm256_set1_epi32(0x7e00),
      _mm256_and_si256(_mm256_srli_epi32(mag, 13), _mm256_set1_epi32(0x3ff)));
  r = _mm256_blendv_epi8(r, nan_bits, nan);
  return Pack16x8(_mm256_or_si256(r, sign));
}

template <bool kFp16>
STRATA_AVX2 __m128i FloatToHalfx8(__m256 x, bool stochastic, __m256i random) {
  return kFp16 ? FloatToFp16x8(x, stochastic, random)
               : FloatToBf16x8(x, stochastic, random);
}

template <bool kFp16>
STRATA_AVX2 __m256 HalfToFloatx8(__m128i h) {
  if (kFp16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// How many of eight 16-bit values are infinity or NaN.
template <bool kFp16>
STRATA_AVX2 int NonFinite16x8(__m128i h) {
  const __m128i exp = _mm_set1_epi16(int16_t(kFp16 ? 0x7c00 : 0x7f80));
  const int mask =
      _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exp), exp));
  return __builtin_popcount(static_cast<unsigned>(mask)) / 2;
}

// ---- AVX-512F: 16 lanes

STRATA_AVX512 __m512i RoundShifted16(__m512i mag, __m512i shift,
                                     bool stochastic, __m512i random) {
  const __m512i k32 = _mm512_set1_epi32(32);
  const __m512i kept = _mm512_srlv_epi32(mag, shift);
  const __m512i frac =
      _mm512_or_si512(_mm512_sllv_epi32(mag, _mm512_sub_epi32(k32, shift)),
                      _mm512_srlv_epi32(mag, _mm512_sub_epi32(shift, k32)));
  const __m512i limit =
      stochastic
          ? _mm512_xor_si512(random, _mm512_set1_epi32(-1))
          : _mm512_sub_epi32(_mm512_set1_epi32(int32_t(0x80000000u)),
                             _mm512_and_si512(kept, _mm512_set1_epi32(1)));
  const __mmask16 up = _mm512_cmpgt_epu32_mask(frac, limit);
  return _mm512_mask_add_epi32(kept, up, kept, _mm512_set1_epi32(1));
}

// As FloatToBf16x8.
STRATA_AVX512 __m256i FloatToBf16x16(__m512 x, bool stochastic,
                                     __m512i random) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i add =
      stochastic
          ? _mm512_srli_epi32(random, 16)
          : _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                             _mm512_and_si512(high, _mm512_set1_epi32(1)));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, add), 16);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_blend_epi32(nan, r,
                              _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

STRATA_AVX512 __m256i FloatToFp16x16(__m512 x, bool stochastic,
                                     __m512i random) {
  if (!stochastic) {
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  const __m512i u = _mm512_castps_si512(x);
  const __m512i mag = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512i sign =
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000));
  const __mmask16 normal =
      _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x387fffff));
  const __m512i e = _mm512_srli_epi32(mag, 23);
  const __mmask16 has_e = _mm512_cmpneq_epu32_mask(e, _mm512_setzero_si512());
  const __m512i m = _mm512_mask_or_epi32(
      _mm512_and_si512(mag, _mm512_set1_epi32(0x7fffff)), has_e,
      _mm512_and_si512(mag, _mm512_set1_epi32(0x7fffff)),
      _mm512_set1_epi32(0x800000));
  const __m512i sub_shift = _mm512_sub_epi32(
      _mm512_set1_epi32(126), _mm512_max_epu32(e, _mm512_set1_epi32(1)));
  const __m512i mg = _mm512_mask_blend_epi32(
      normal, m, _mm512_sub_epi32(mag, _mm512_set1_epi32(0x38000000)));
  const __m512i sh =
      _mm512_mask_blend_epi32(normal, sub_shift, _mm512_set1_epi32(13));
  __m512i r = RoundShifted16(mg, sh, true, random);
  const __mmask16 big =
      _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x477fffff));
  r = _mm512_mask_blend_epi32(big, r, _mm512_set1_epi32(0x7c00));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7f800000));
  const __m512i nan_bits = _mm512_or_si512(
      _mm512_set1_epi32(0x7e00),
      _mm512_and_si512(_mm512_srli_epi32(mag, 13), _mm512_set1_epi32(0x3ff)));
  r = _mm512_mask_blend_epi32(nan, r, nan_bits);
  return _mm512_cvtepi32_epi16(_mm512_or_si512(r, sign));
}

template <bool kFp16>
STRATA_AVX512 __m256i FloatToHalfx16(__m512 x, bool stochastic,
                                     __m512i random) {
  return kFp16 ? FloatToFp16x16(x, stochastic, random)
               : FloatToBf16x16(x, stochastic, random);
}

template <bool kFp16>
STRATA_AVX512 __m512 HalfToFloatx16(__m256i h) {
  if (kFp16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <bool kFp16>
STRATA_AVX512 int NonFinite16x16(__m256i h) {
  const __m512i exp = _mm512_set1_epi32(kFp16 ? 0x7c00 : 0x7f80);
  const __mmask16 bad = _mm512_cmpeq_epi32_mask(
      _mm512_and_si512(_mm512_cvtepu16_epi32(h), exp), exp);
  return __builtin_popcount(static_cast<unsigned>(bad));
}

// ---- the random bits of lanes [index, index + count)

inline void FillStochasticBits(uint64_t seed, uint64_t index, int count,
                               uint32_t* bits) {
  for (int j = 0; j < count; ++j) bits[j] = StochasticBits(seed, index + j);
}

#undef STRATA_AVX2
#undef STRATA_AVX512

}  // namespace strata::train::simd

#endif  // __x86_64__
#endif  // STRATA_TRAIN_COMPUTE_CPU_HALF_SIMD_H_
