// cuda_transformer_kernels.cu: the kernels behind CudaCompute's transformer
// operations other than attention, and the host functions that launch them
// (cuda_transformer_kernels.h says how they stay deterministic). Built only
// with CUDA, with --fmad=false, so no multiply-add is fused behind our back.
//
// Two shapes of work (attention, a warp per row, is in
// cuda_attention_kernels.cu):
//  - a block of kRowThreads per row (LayerNorm, cross-entropy): each thread
//    folds a strided share of the row in order, then BlockReduce's fixed tree;
//  - a thread per output element or column (elementwise ops, parameter
//    gradients), each summing its terms in the contract's order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cuda/cuda_reduce.h"
#include "train/compute/cuda/cuda_transformer_kernels.h"

namespace strata::train::kernels {
namespace {

// ---- LayerNorm.

__global__ void LayerNormForwardKernel(const float* x, const float* weight,
                                       const float* bias, float* out,
                                       float* mean, float* rstd, int64_t N,
                                       int64_t C) {
  __shared__ float shared[kRowThreads];
  const float c_count = static_cast<float>(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* xr = x + row * C;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += kRowThreads) sum += xr[c];
    const float m = BlockReduce(sum, shared, SumOp{}) / c_count;
    // Two passes: the variance of deviations, not E[x^2] - m^2, which
    // cancels.
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
      const float d = xr[c] - m;
      sq += d * d;
    }
    const float var = BlockReduce(sq, shared, SumOp{}) / c_count;
    const float r = 1.0f / sqrtf(var + kLayerNormEps);
    float* o = out + row * C;
    for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
      o[c] = (xr[c] - m) * r * weight[c] + bias[c];
    }
    if (threadIdx.x == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
  }
}

// dx += (dn - mean(dn) - xhat * mean(dn * xhat)) * rstd per row, dn = dout *
// weight, xhat = (x - mean) * rstd.
__global__ void LayerNormInputGradKernel(const float* x, const float* weight,
                                         const float* mean, const float* rstd,
                                         const float* dout, float* dx,
                                         int64_t N, int64_t C) {
  __shared__ float shared[kRowThreads];
  const float c_count = static_cast<float>(C);
  for (int64_t row = blockIdx.x; row < N; row += gridDim.x) {
    const float* xr = x + row * C;
    const float* dr = dout + row * C;
    const float m = mean[row];
    const float r = rstd[row];
    float dn_sum = 0.0f;
    float dn_xhat_sum = 0.0f;
    for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
      const float dn = weight[c] * dr[c];
      dn_sum += dn;
      dn_xhat_sum += dn * ((xr[c] - m) * r);
    }
    const float dn_mean = BlockReduce(dn_sum, shared, SumOp{}) / c_count;
    const float dn_xhat_mean =
        BlockReduce(dn_xhat_sum, shared, SumOp{}) / c_count;
    float* dxr = dx + row * C;
    for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
      const float xhat = (xr[c] - m) * r;
      const float dn = weight[c] * dr[c];
      dxr[c] += (dn - dn_mean - xhat * dn_xhat_mean) * r;
    }
  }
}

// dweight[c] += xhat * dout and dbias[c] += dout over the rows in order, one
// thread per column (adjacent threads read adjacent columns: coalesced).
__global__ void LayerNormParamGradKernel(const float* x, const float* mean,
                                         const float* rstd, const float* dout,
                                         float* dweight, float* dbias,
                                         int64_t N, int64_t C) {
  for (int64_t c = GridIndex(); c < C; c += GridStride()) {
    float dw = dweight[c];
    float db = dbias[c];
    for (int64_t n = 0; n < N; ++n) {
      const float d = dout[n * C + c];
      dw += ((x[n * C + c] - mean[n]) * rstd[n]) * d;
      db += d;
    }
    dweight[c] = dw;
    dbias[c] = db;
  }
}

// ---- Embedding.

__global__ void EmbeddingForwardKernel(const int32_t* tokens, const float* wte,
                                       const float* wpe, float* out, int64_t T,
                                       int64_t C, int64_t V, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const int64_t row = i / C;
    const int64_t c = i % C;
    const int32_t token = tokens[row];
    out[i] = token >= 0 && token < V
                 ? __fadd_rn(wte[token * C + c], wpe[(row % T) * C + c])
                 : NAN;
  }
}

// dwte[tokens[n]][c] += dout[n][c] for n in order: one thread per column c,
// so a token that repeats is added to by one thread, in order.
__global__ void TokenGradKernel(const int32_t* tokens, const float* dout,
                                float* dwte, int64_t N, int64_t C, int64_t V) {
  for (int64_t c = GridIndex(); c < C; c += GridStride()) {
    for (int64_t n = 0; n < N; ++n) {
      const int32_t token = tokens[n];
      if (token < 0 || token >= V) continue;
      float* w = dwte + token * C + c;
      *w = __fadd_rn(*w, dout[n * C + c]);
    }
  }
}

// dwpe[t][c] += dout[b][t][c] for b in order: one thread per element.
__global__ void PositionGradKernel(const float* dout, float* dwpe, int64_t B,
                                   int64_t tc) {
  for (int64_t i = GridIndex(); i < tc; i += GridStride()) {
    float acc = dwpe[i];
    for (int64_t b = 0; b < B; ++b) acc = __fadd_rn(acc, dout[b * tc + i]);
    dwpe[i] = acc;
  }
}

// ---- Cross-entropy.

// *first_bad = the first row whose target is outside [0, V), or -1: one
// block; each thread's first hit is its smallest, the tree takes the least.
__global__ void FirstBadTargetKernel(const int32_t* targets, int64_t rows,
                                     int64_t V, long long* first_bad) {
  __shared__ long long shared[kRowThreads];
  long long bad = rows;
  for (int64_t i = threadIdx.x; i < rows; i += kRowThreads) {
    if (targets[i] < 0 || targets[i] >= V) {
      bad = i;
      break;
    }
  }
  bad = BlockReduce(bad, shared, MinOp{});
  if (threadIdx.x == 0) *first_bad = bad == rows ? -1 : bad;
}

// One block per row: max, sum of exp(z - max), loss = log(sum) - (z_target -
// max), then (softmax - onehot) * grad_scale. Does nothing if a target was
// bad (the whole grid reads the same flag).
__global__ void CrossEntropyRowsKernel(
    const float* logits, const int32_t* targets, float* dlogits, int64_t rows,
    int64_t V, float grad_scale, const long long* first_bad, float* row_loss) {
  if (*first_bad >= 0) return;
  __shared__ float shared[kRowThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* z = logits + row * V;
    const int32_t target = targets[row];
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += kRowThreads) {
      max = fmaxf(max, z[j]);
    }
    max = BlockReduce(max, shared, MaxOp{});
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += kRowThreads) {
      sum += expf(z[j] - max);
    }
    // Read before BlockReduce's barriers: in place, the pass below
    // overwrites it.
    const float z_target = z[target];
    sum = BlockReduce(sum, shared, SumOp{});
    if (threadIdx.x == 0) row_loss[row] = logf(sum) - (z_target - max);
    if (dlogits == nullptr) continue;
    float* d = dlogits + row * V;
    for (int64_t j = threadIdx.x; j < V; j += kRowThreads) {
      const float p = expf(z[j] - max) / sum;
      d[j] = (p - (j == target ? 1.0f : 0.0f)) * grad_scale;
    }
  }
}

// ---- Elementwise and the gradient norm.

__global__ void AddKernel(const float* a, const float* b, float* out,
                          int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    out[i] = __fadd_rn(a[i], b[i]);
  }
}

__global__ void ScaleKernel(float* x, float s, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    x[i] = __fmul_rn(x[i], s);
  }
}

// Squares are exact in double (24-bit significands); each thread folds its
// grid-strided share in order, then the block's tree.
__global__ void SumOfSquaresKernel(const float* x, int64_t n,
                                   double* partials) {
  __shared__ double shared[kRowThreads];
  double sum = 0.0;
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const double v = x[i];
    sum += v * v;
  }
  sum = BlockReduce(sum, shared, SumOp{});
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

}  // namespace

absl::Status LayerNormForward(const float* x, const float* weight,
                              const float* bias, float* out, float* mean,
                              float* rstd, int64_t N, int64_t C,
                              cudaStream_t stream) {
  LayerNormForwardKernel<<<RowBlocks(N), kRowThreads, 0, stream>>>(
      x, weight, bias, out, mean, rstd, N, C);
  return CudaLaunchStatus("LayerNormForwardKernel");
}

absl::Status LayerNormBackward(const float* x, const float* weight,
                               const float* mean, const float* rstd,
                               const float* dout, float* dx, float* dweight,
                               float* dbias, int64_t N, int64_t C,
                               cudaStream_t stream) {
  LayerNormInputGradKernel<<<RowBlocks(N), kRowThreads, 0, stream>>>(
      x, weight, mean, rstd, dout, dx, N, C);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("LayerNormInputGradKernel"));
  LayerNormParamGradKernel<<<Blocks(C), kBlockThreads, 0, stream>>>(
      x, mean, rstd, dout, dweight, dbias, N, C);
  return CudaLaunchStatus("LayerNormParamGradKernel");
}

absl::Status EmbeddingForward(const int32_t* tokens, const float* wte,
                              const float* wpe, float* out, int64_t B,
                              int64_t T, int64_t C, int64_t V,
                              cudaStream_t stream) {
  const int64_t n = B * T * C;
  EmbeddingForwardKernel<<<Blocks(n), kBlockThreads, 0, stream>>>(
      tokens, wte, wpe, out, T, C, V, n);
  return CudaLaunchStatus("EmbeddingForwardKernel");
}

absl::Status EmbeddingBackward(const int32_t* tokens, const float* dout,
                               float* dwte, float* dwpe, int64_t B, int64_t T,
                               int64_t C, int64_t V, cudaStream_t stream) {
  TokenGradKernel<<<Blocks(C), kBlockThreads, 0, stream>>>(tokens, dout, dwte,
                                                           B * T, C, V);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("TokenGradKernel"));
  PositionGradKernel<<<Blocks(T * C), kBlockThreads, 0, stream>>>(dout, dwpe, B,
                                                                  T * C);
  return CudaLaunchStatus("PositionGradKernel");
}

absl::Status CrossEntropy(const float* logits, const int32_t* targets,
                          float* dlogits, int64_t rows, int64_t V,
                          float grad_scale, long long* first_bad,
                          float* row_loss, cudaStream_t stream) {
  FirstBadTargetKernel<<<1, kRowThreads, 0, stream>>>(targets, rows, V,
                                                      first_bad);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("FirstBadTargetKernel"));
  CrossEntropyRowsKernel<<<RowBlocks(rows), kRowThreads, 0, stream>>>(
      logits, targets, dlogits, rows, V, grad_scale, first_bad, row_loss);
  return CudaLaunchStatus("CrossEntropyRowsKernel");
}

absl::Status Add(const float* a, const float* b, float* out, int64_t n,
                 cudaStream_t stream) {
  AddKernel<<<Blocks(n), kBlockThreads, 0, stream>>>(a, b, out, n);
  return CudaLaunchStatus("AddKernel");
}

absl::Status Scale(float* x, float s, int64_t n, cudaStream_t stream) {
  ScaleKernel<<<Blocks(n), kBlockThreads, 0, stream>>>(x, s, n);
  return CudaLaunchStatus("ScaleKernel");
}

int SumOfSquaresBlocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(
      (n + kRowThreads - 1) / kRowThreads, 1, kMaxSumOfSquaresBlocks));
}

absl::Status SumOfSquaresPartials(const float* x, int64_t n, double* partials,
                                  cudaStream_t stream) {
  SumOfSquaresKernel<<<SumOfSquaresBlocks(n), kRowThreads, 0, stream>>>(
      x, n, partials);
  return CudaLaunchStatus("SumOfSquaresKernel");
}

}  // namespace strata::train::kernels
