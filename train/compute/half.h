// half.h: float <-> bf16 and float <-> fp16 for one value, the reference
// every vectorised cast (half_cast.h), the fused Adam pass (cpu_adam.h) and
// the CUDA kernels must match bit for bit. Header-only and usable in CUDA
// device code, so the GPU runs these very functions.
//
// Narrowing rounds a float's magnitude bits at a fixed point: the 16 low
// bits for bf16, the 13 low bits (after moving the exponent bias) for a
// normal fp16, more for an fp16 subnormal. RoundShifted does that one step
// for both roundings:
//  - nearest even: IEEE 754 round to nearest, ties to even. A carry out of
//    the mantissa moves to the next binade, and past the largest finite
//    value to infinity (fp16: |x| >= 65520; bf16: above 0x7f7f8000's
//    neighbourhood, as IEEE says).
//  - stochastic (Gupta et al., ICML 2015): the bits shifted out, as a
//    32-bit fraction f, carry up when f + r >= 2^32 for 32 random bits r,
//    i.e. with probability f / 2^32: unbiased to within 2^-32 of a unit in
//    the last place. Values can round up to infinity the same way.
// NaN stays NaN and is quieted, with its top payload bits kept: what x86's
// F16C (vcvtps2ph/vcvtph2ps) does, so the F16C paths give these bits.
// Infinity stays infinity; fp16 subnormals are produced and read exactly;
// float subnormals narrow to zero or the smallest fp16 subnormal as the
// rounding says. Nothing depends on the FPU's rounding mode or FTZ/DAZ:
// narrowing is integer arithmetic, widening exact.
#ifndef STRATA_TRAIN_COMPUTE_HALF_H_
#define STRATA_TRAIN_COMPUTE_HALF_H_

#include <cstdint>
#include <cstring>

#include "base/splitmix64.h"

#if defined(__CUDACC__)
#define STRATA_HOST_DEVICE __host__ __device__
#else
#define STRATA_HOST_DEVICE
#endif

namespace strata::train {

STRATA_HOST_DEVICE inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

STRATA_HOST_DEVICE inline float BitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// x >> s and x << s with 0 for s >= 32 (what AVX2's vpsrlvd/vpsllvd give;
// C++ leaves it undefined).
STRATA_HOST_DEVICE inline uint32_t ShiftRight(uint32_t x, uint32_t s) {
  return s >= 32 ? 0u : x >> s;
}
STRATA_HOST_DEVICE inline uint32_t ShiftLeft(uint32_t x, uint32_t s) {
  return s >= 32 ? 0u : x << s;
}

// mag >> shift, rounded. The bits shifted out become a 32-bit fraction f
// (exact for shift <= 32; beyond, only its top 32 bits, which can never
// reach a half). Nearest even: up when f > 1/2, or f == 1/2 and the kept
// value is odd. Stochastic: up when f + random carries out of 32 bits.
// Unsigned wrap-around in `shift - 32` and `32 - shift` is intended: the
// out-of-range shift gives 0.
STRATA_HOST_DEVICE inline uint32_t RoundShifted(uint32_t mag, uint32_t shift,
                                                bool stochastic,
                                                uint32_t random) {
  const uint32_t kept = ShiftRight(mag, shift);
  const uint32_t frac =
      ShiftLeft(mag, 32u - shift) | ShiftRight(mag, shift - 32u);
  const uint32_t limit = stochastic ? ~random : 0x80000000u - (kept & 1u);
  return kept + (frac > limit ? 1u : 0u);
}

// ---- bf16

// float -> bf16 bits. `random` is used only when `stochastic`.
STRATA_HOST_DEVICE inline uint16_t FloatToBf16(float f, bool stochastic = false,
                                               uint32_t random = 0) {
  const uint32_t u = FloatBits(f);
  const uint32_t mag = u & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  return static_cast<uint16_t>(sign |
                               RoundShifted(mag, 16, stochastic, random));
}

// bf16 bits -> float, exact (a NaN keeps its bits).
STRATA_HOST_DEVICE inline float Bf16ToFloat(uint16_t h) {
  return BitsFloat(static_cast<uint32_t>(h) << 16);
}

// ---- fp16

// float -> fp16 bits. `random` is used only when `stochastic`.
STRATA_HOST_DEVICE inline uint16_t FloatToFp16(float f, bool stochastic = false,
                                               uint32_t random = 0) {
  const uint32_t u = FloatBits(f);
  const uint32_t mag = u & 0x7fffffffu;
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (mag > 0x7f800000u) {
    return static_cast<uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
  }
  // 2^16 and above (and infinity): beyond any rounding of 65504.
  if (mag >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t r;
  if (mag >= 0x38800000u) {
    // Normal in fp16 (|x| >= 2^-14): rebias the exponent from 127 to 15,
    // then drop 13 mantissa bits.
    r = RoundShifted(mag - 0x38000000u, 13, stochastic, random);
  } else {
    // Subnormal in fp16: units of 2^-24. A normal float is
    // (2^23 + m) 2^(e - 150), so shift by 126 - e; a float subnormal is
    // m 2^-149, shift 125.
    const uint32_t e = mag >> 23;
    const uint32_t m = (mag & 0x7fffffu) | (e != 0 ? 0x800000u : 0u);
    r = RoundShifted(m, 126u - (e != 0 ? e : 1u), stochastic, random);
  }
  return static_cast<uint16_t>(sign | r);
}

// fp16 bits -> float, exact; a NaN is quieted (bit 22 set), as F16C does.
STRATA_HOST_DEVICE inline float Fp16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) {
    return BitsFloat(sign | 0x7f800000u | (m != 0 ? 0x400000u : 0u) |
                     (m << 13));
  }
  if (e != 0) return BitsFloat(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return BitsFloat(sign);
  // Subnormal m 2^-24: normalise so the leading one becomes implicit.
  uint32_t p = 9;  // position of m's leading one
  while ((m >> p) == 0) --p;
  return BitsFloat(sign | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7fffffu));
}

// True when the 16-bit value is infinity or NaN.
STRATA_HOST_DEVICE inline bool Bf16NonFinite(uint16_t h) {
  return (h & 0x7f80u) == 0x7f80u;
}
STRATA_HOST_DEVICE inline bool Fp16NonFinite(uint16_t h) {
  return (h & 0x7c00u) == 0x7c00u;
}

// ---- stochastic rounding's random bits

// The 32 random bits element `index` of a stochastic cast uses: the high
// half of output index + 1 of the SplitMix64 stream started at `seed`
// (base/splitmix64.h). A function of (seed, index) alone, so any split of a
// cast over threads or devices draws the same bits.
STRATA_HOST_DEVICE inline uint32_t StochasticBits(uint64_t seed,
                                                  uint64_t index) {
  return static_cast<uint32_t>(
      SplitMix64Mix(seed + (index + 1) * kSplitMix64Gamma) >> 32);
}

// A per-tensor, per-step seed from a run's seed: distinct (tensor, step)
// pairs get unrelated streams, and a resumed run redraws the same ones.
STRATA_HOST_DEVICE inline uint64_t StochasticSeed(uint64_t run_seed,
                                                  uint64_t tensor,
                                                  uint64_t step) {
  return SplitMix64Mix(SplitMix64Mix(run_seed ^ 0x5eedull) ^
                       SplitMix64Mix(tensor * kSplitMix64Gamma + step));
}

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_HALF_H_
