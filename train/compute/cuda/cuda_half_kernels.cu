// cuda_half_kernels.cu: the mixed-precision kernels and their launchers
// (cuda_half_kernels.h says how they agree with the host). Built only with
// CUDA, with --fmad=false.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "base/cuda_status.h"
#include "train/compute/cuda/cuda_half_kernels.h"
#include "train/compute/half.h"

namespace strata::train::kernels {
namespace {

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxBlocks = 8192;

int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(
      (n + kBlockThreads - 1) / kBlockThreads, 1, kMaxBlocks));
}

__device__ int64_t GridIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <bool kFp16>
__device__ float Widen(uint16_t h) {
  return kFp16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
}

template <bool kFp16>
__device__ uint16_t Narrow(float x, bool stochastic, uint32_t random) {
  return kFp16 ? FloatToFp16(x, stochastic, random)
               : FloatToBf16(x, stochastic, random);
}

template <bool kFp16>
__device__ bool NonFinite16(uint16_t h) {
  return kFp16 ? Fp16NonFinite(h) : Bf16NonFinite(h);
}

// Adds a thread's count to the total; nearly every thread has none.
__device__ void AddCount(unsigned long long* total, unsigned long long mine) {
  if (total != nullptr && mine != 0) atomicAdd(total, mine);
}

template <bool kFp16, bool kStochastic>
__global__ void CastToHalfKernel(const float* src, uint16_t* dst, int64_t n,
                                 uint64_t seed, uint64_t first,
                                 unsigned long long* nonfinite) {
  unsigned long long bad = 0;
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const uint32_t r = kStochastic ? StochasticBits(seed, first + i) : 0u;
    const uint16_t h = Narrow<kFp16>(src[i], kStochastic, r);
    dst[i] = h;
    bad += NonFinite16<kFp16>(h) ? 1 : 0;
  }
  AddCount(nonfinite, bad);
}

template <bool kFp16>
__global__ void CastToFloatKernel(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    dst[i] = Widen<kFp16>(src[i]);
  }
}

template <bool kFp16>
__global__ void BroadcastRows16Kernel(const uint16_t* bias, float* y,
                                      int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    y[i] = Widen<kFp16>(bias[i % cols]);
  }
}

template <bool kFp16>
__global__ void EmbeddingForward16Kernel(const int32_t* tokens,
                                         const uint16_t* wte,
                                         const uint16_t* wpe, float* out,
                                         int64_t T, int64_t C, int64_t V,
                                         int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const int64_t row = i / C, c = i % C;
    const int32_t token = tokens[row];
    out[i] = token >= 0 && token < V
                 ? __fadd_rn(Widen<kFp16>(wte[token * C + c]),
                             Widen<kFp16>(wpe[(row % T) * C + c]))
                 : NAN;
  }
}

// The hoisted scalars, as AdamMixedUpdateCpu hoists them.
struct MixedAdamScalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, lr, eps, c1, c2;
  float grad_scale, decay;
  uint64_t seed, first;
};

// The host pass's element, each operation a separately rounded _rn op.
template <bool kFp16, bool kStochastic>
__global__ void AdamMixedKernel(MixedAdamScalars s, float* w, float* m,
                                float* v, const uint16_t* g, uint16_t* w16,
                                int64_t n, unsigned long long* nonfinite) {
  unsigned long long bad = 0;
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const float gi = __fmul_rn(Widen<kFp16>(g[i]), s.grad_scale);
    bad += (__float_as_uint(gi) & 0x7f800000u) == 0x7f800000u ? 1 : 0;
    const float mi =
        __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, gi));
    const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]),
                               __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, s.c2)), s.eps);
    const float step = __fdiv_rn(__fmul_rn(s.lr, __fmul_rn(mi, s.c1)), denom);
    const float wi = __fsub_rn(__fmul_rn(w[i], s.decay), step);
    w[i] = wi;
    const uint32_t r = kStochastic ? StochasticBits(s.seed, s.first + i) : 0u;
    w16[i] = Narrow<kFp16>(wi, kStochastic, r);
  }
  AddCount(nonfinite, bad);
}

}  // namespace

absl::Status CastToHalf(Precision type, const RoundingMode& rounding,
                        const float* src, uint16_t* dst, int64_t n,
                        unsigned long long* nonfinite, cudaStream_t stream) {
  const bool fp16 = type == Precision::kFp16;
  const bool sr = rounding.rounding == Rounding::kStochastic;
  const uint64_t first = static_cast<uint64_t>(rounding.first_index);
  auto kernel =
      fp16 ? (sr ? CastToHalfKernel<true, true> : CastToHalfKernel<true, false>)
           : (sr ? CastToHalfKernel<false, true>
                 : CastToHalfKernel<false, false>);
  kernel<<<Blocks(n), kBlockThreads, 0, stream>>>(src, dst, n, rounding.seed,
                                                  first, nonfinite);
  return CudaLaunchStatus("CastToHalfKernel");
}

absl::Status CastToFloat(Precision type, const uint16_t* src, float* dst,
                         int64_t n, cudaStream_t stream) {
  auto kernel = type == Precision::kFp16 ? CastToFloatKernel<true>
                                         : CastToFloatKernel<false>;
  kernel<<<Blocks(n), kBlockThreads, 0, stream>>>(src, dst, n);
  return CudaLaunchStatus("CastToFloatKernel");
}

absl::Status BroadcastRows16(Precision type, const uint16_t* bias, float* y,
                             int64_t rows, int64_t cols, cudaStream_t stream) {
  auto kernel = type == Precision::kFp16 ? BroadcastRows16Kernel<true>
                                         : BroadcastRows16Kernel<false>;
  kernel<<<Blocks(rows * cols), kBlockThreads, 0, stream>>>(bias, y, rows,
                                                            cols);
  return CudaLaunchStatus("BroadcastRows16Kernel");
}

absl::Status EmbeddingForward16(Precision type, const int32_t* tokens,
                                const uint16_t* wte, const uint16_t* wpe,
                                float* out, int64_t B, int64_t T, int64_t C,
                                int64_t V, cudaStream_t stream) {
  const int64_t n = B * T * C;
  auto kernel = type == Precision::kFp16 ? EmbeddingForward16Kernel<true>
                                         : EmbeddingForward16Kernel<false>;
  kernel<<<Blocks(n), kBlockThreads, 0, stream>>>(tokens, wte, wpe, out, T, C,
                                                  V, n);
  return CudaLaunchStatus("EmbeddingForward16Kernel");
}

absl::Status AdamMixed(const AdamParams& p, const MixedAdamParams& mp, float* w,
                       float* m, float* v, const uint16_t* g16, uint16_t* w16,
                       int64_t n, unsigned long long* nonfinite,
                       cudaStream_t stream) {
  const MixedAdamScalars s{p.beta1,
                           p.beta2,
                           1.0f - p.beta1,
                           1.0f - p.beta2,
                           p.lr,
                           p.eps,
                           p.correction1,
                           p.correction2,
                           mp.grad_scale,
                           mp.decay,
                           mp.rounding.seed,
                           static_cast<uint64_t>(mp.rounding.first_index)};
  const bool fp16 = mp.type == Precision::kFp16;
  const bool sr = mp.rounding.rounding == Rounding::kStochastic;
  auto kernel =
      fp16
          ? (sr ? AdamMixedKernel<true, true> : AdamMixedKernel<true, false>)
          : (sr ? AdamMixedKernel<false, true> : AdamMixedKernel<false, false>);
  kernel<<<Blocks(n), kBlockThreads, 0, stream>>>(s, w, m, v, g16, w16, n,
                                                  nonfinite);
  return CudaLaunchStatus("AdamMixedKernel");
}

}  // namespace strata::train::kernels
