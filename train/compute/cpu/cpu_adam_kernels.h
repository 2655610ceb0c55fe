// cpu_adam_kernels.h: what cpu_adam.cc (the fp32 kernels, the per-path
// table and the dispatch) shares with cpu_adam_mixed.cc (the fused
// mixed-precision kernels): the hoisted scalars and the mixed kernels'
// per-path sets. Internal to train/.
#ifndef STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_KERNELS_H_
#define STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_KERNELS_H_

#include <cstdint>

#include "train/compute/compute.h"

namespace strata::train::adam_kernels {

// The per-call scalars, computed in float exactly as the formula reads; the
// CUDA path hoists the same ones on the host the same way.
struct AdamScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, lr, eps, c1, c2;
};

inline AdamScalars Hoist(const AdamParams& p) {
  return {p.beta1, p.beta2, 1.0f - p.beta1, 1.0f - p.beta2,
          p.lr,    p.eps,   p.correction1,  p.correction2};
}

// The fused pass's own scalars (MixedAdamParams, compute.h); `first` is the
// stochastic index of element 0 of the range.
struct MixedScalars {
  float grad_scale, decay;
  uint64_t seed, first;
};

// One fused kernel: AdamMixedUpdateCpu's pass over [0, n); returns the
// non-finite gradients seen.
using MixedKernel = int64_t (*)(const AdamScalars& s, const MixedScalars& ms,
                                float* w, float* m, float* v, const uint16_t* g,
                                uint16_t* w16, int64_t n);

// One vector path's fused kernels, by format and rounding.
struct MixedKernels {
  MixedKernel bf16_nearest, bf16_stochastic, fp16_nearest, fp16_stochastic;
};

// Defined in cpu_adam_mixed.cc. The AVX ones exist on x86-64 only.
MixedKernels MixedBaseline();
MixedKernels MixedAvx2();
MixedKernels MixedAvx512();

}  // namespace strata::train::adam_kernels

#endif  // STRATA_TRAIN_COMPUTE_CPU_CPU_ADAM_KERNELS_H_
