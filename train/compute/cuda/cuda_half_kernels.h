// cuda_half_kernels.h: the CUDA kernels of CudaCompute's mixed-precision
// operations (cuda_precision_compute.cc), each behind a host function that
// launches it on `stream` and returns the launch check. Pointers are CUDA
// device memory; shapes and types are checked by the caller (compute.h).
//
// Agreement with the host: the casts run half.h's very functions (integer
// arithmetic, so the same bits as every host path), the stochastic bits
// come from (seed, index) alone, and the fused Adam kernel spells the host
// pass's operations with the _rn intrinsics under --fmad=false, so it
// matches AdamMixedUpdateCpu bit for bit. The non-finite count is an
// integer sum (one atomicAdd per thread that saw any), so its value does
// not depend on the order the blocks run in.
//
// Built only with CUDA (STRATA_HAVE_CUDA); include only from CUDA-built files.
#ifndef STRATA_TRAIN_COMPUTE_CUDA_CUDA_HALF_KERNELS_H_
#define STRATA_TRAIN_COMPUTE_CUDA_CUDA_HALF_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "train/compute/compute.h"
#include "train/compute/precision.h"

namespace strata::train::kernels {

// dst = src rounded as `rounding` says, n > 0; adds the non-finite results
// to *nonfinite unless it is null (operand casts that are no check).
absl::Status CastToHalf(Precision type, const RoundingMode& rounding,
                        const float* src, uint16_t* dst, int64_t n,
                        unsigned long long* nonfinite, cudaStream_t stream);

// dst = src widened, n > 0.
absl::Status CastToFloat(Precision type, const uint16_t* src, float* dst,
                         int64_t n, cudaStream_t stream);

// y[i][j] = widen(bias[j]) for each of `rows` rows of `cols`.
absl::Status BroadcastRows16(Precision type, const uint16_t* bias, float* y,
                             int64_t rows, int64_t cols, cudaStream_t stream);

// out[r][c] = widen(wte[tokens[r]][c]) + widen(wpe[r % T][c]) for B x T
// rows of C; NaN for a token outside [0, V).
absl::Status EmbeddingForward16(Precision type, const int32_t* tokens,
                                const uint16_t* wte, const uint16_t* wpe,
                                float* out, int64_t B, int64_t T, int64_t C,
                                int64_t V, cudaStream_t stream);

// AdamMixedUpdateCpu's pass on n > 0 elements; adds the non-finite scaled
// gradients to *nonfinite.
absl::Status AdamMixed(const AdamParams& p, const MixedAdamParams& mp, float* w,
                       float* m, float* v, const uint16_t* g16, uint16_t* w16,
                       int64_t n, unsigned long long* nonfinite,
                       cudaStream_t stream);

}  // namespace strata::train::kernels

#endif  // STRATA_TRAIN_COMPUTE_CUDA_CUDA_HALF_KERNELS_H_
