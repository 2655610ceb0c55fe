// half_cast.h: float32 arrays to 16-bit (bf16 or fp16) and back on the
// host, one kernel per vector path (vector_path.h), split over a HostPool.
// What CpuCompute's CastToHalf/CastToFloat run (compute.h) and what the
// host optimizer uses for gradients and parameter copies.
//
// Every path gives the bits of half.h's scalar functions (half_simd.h says
// why), at any split: element i's stochastic bits come from
// (mode.seed, mode.first_index + i) alone. A narrowing cast counts, in the
// same pass, the results that are infinity or NaN: a non-finite input, or
// an fp16 overflow (|x| >= 65520 at nearest even) — the loss-scale check
// riding along with the gradient cast (Micikevicius et al., "Mixed
// precision training", ICLR 2018).
//
// `type` must be kBf16 or kFp16 here (CheckHalfPrecision, precision.h, is
// the callers' check); `path` must be supported (VectorPathSupported).
#ifndef STRATA_TRAIN_COMPUTE_CPU_HALF_CAST_H_
#define STRATA_TRAIN_COMPUTE_CPU_HALF_CAST_H_

#include <cstdint>

#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/compute/precision.h"

namespace strata::train {

// A cast is split over threads only in ranges of at least this many
// elements. Not measured on its own: a cast moves 6 bytes per element
// against Adam's 28, so it is given twice Adam's threshold
// (kAdamMinElementsPerThread) to amortise the same wake-up cost.
inline constexpr int64_t kCastMinElementsPerThread = int64_t{1} << 17;

// dst[i] = src[i] rounded to `type` as `mode` says, i in [0, n), with
// `path`'s kernel on the calling thread. Returns how many dst[i] are
// infinity or NaN.
int64_t CastToHalfRange(VectorPath path, Precision type,
                        const RoundingMode& mode, const float* src,
                        uint16_t* dst, int64_t n);

// dst[i] = src[i] widened exactly (fp16 NaNs quieted), i in [0, n), with
// `path`'s kernel on the calling thread.
void CastToFloatRange(VectorPath path, Precision type, const uint16_t* src,
                      float* dst, int64_t n);

// The two casts with `path`'s kernel split over `pool` (each thread one
// contiguous range of at least kCastMinElementsPerThread).
int64_t CastToHalfCpuWith(VectorPath path, HostPool& pool, Precision type,
                          const RoundingMode& mode, const float* src,
                          uint16_t* dst, int64_t n);
void CastToFloatCpuWith(VectorPath path, HostPool& pool, Precision type,
                        const uint16_t* src, float* dst, int64_t n);

// The same on ChosenVectorPath() and HostPool::Shared().
int64_t CastToHalfCpu(Precision type, const RoundingMode& mode,
                      const float* src, uint16_t* dst, int64_t n);
void CastToFloatCpu(Precision type, const uint16_t* src, float* dst, int64_t n);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_HALF_CAST_H_
