// cpu_adam.h: the host Adam update behind AdamUpdateCpu (compute.h), open to
// tests and benchmarks: one kernel per vector path (vector_path.h), a way to
// run a chosen one, and the split of an update over a HostPool.
//
// Each path's kernels sit in one table entry (AdamKernels in cpu_adam.cc),
// selected by the path; AdamUpdateCpu uses ChosenVectorPath() and
// HostPool::Shared(). The fused mixed-precision pass (AdamMixedUpdateCpu,
// compute.h: 16-bit gradient in, fp32 master weight and moments, 16-bit
// parameter copy out, unscale and clipping folded in; cpu_adam_mixed.cc)
// is the second entry beside the fp32 one, built per path the same way and
// dispatched by the same path and split.
#ifndef STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_H_
#define STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_H_

#include <cstdint>

#include "train/compute/compute.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"

namespace strata::train {

// An update is split over threads only in ranges of at least this many
// elements. cpu_adam_bench's split sweep on the 2-core development machine
// (AVX2): splitting 64 Ki elements in two gave 0.90-1.29x one thread, 128 Ki
// gave 1.28-1.50x (three runs with the second core free); a split costs a
// wake-up of a few microseconds per worker (README, Measured).
inline constexpr int64_t kAdamMinElementsPerThread = int64_t{1} << 16;

// Split points are multiples of this many elements (64 bytes): every range
// starts on a cache line when the arrays do. Results do not depend on it.
inline constexpr int64_t kAdamSplitAlignElements = 16;

// AdamUpdateCpu's update of [0, n) with `path`'s kernel, on the calling
// thread only. `path` must be supported here (VectorPathSupported); an
// unsupported one would fault on an illegal instruction.
void AdamRange(VectorPath path, const AdamParams& p, float* w, float* m,
               float* v, const float* g, int64_t n);

// AdamUpdateCpu with the path and the pool given (for tests and the bench):
// `pool`'s threads each update one contiguous range of at least
// kAdamMinElementsPerThread elements, with `path`'s kernel.
void AdamUpdateCpuWith(VectorPath path, HostPool& pool, const AdamParams& p,
                       float* w, float* m, float* v, const float* g, int64_t n);

// AdamMixedUpdateCpu (compute.h) over [0, n) with `path`'s kernel on the
// calling thread; returns the non-finite gradients seen. `path` must be
// supported here; mp.type must be kBf16 or kFp16.
int64_t AdamMixedRange(VectorPath path, const AdamParams& p,
                       const MixedAdamParams& mp, float* w, float* m, float* v,
                       const uint16_t* g, uint16_t* w16, int64_t n);

// AdamMixedUpdateCpu with the path and the pool given, split as
// AdamUpdateCpuWith splits.
int64_t AdamMixedUpdateCpuWith(VectorPath path, HostPool& pool,
                               const AdamParams& p, const MixedAdamParams& mp,
                               float* w, float* m, float* v, const uint16_t* g,
                               uint16_t* w16, int64_t n);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_H_
