// cuda_transformer_kernels.h: the CUDA kernels behind CudaCompute's
// transformer operations (LayerNorm, causal attention, embedding, sliced
// cross-entropy, Add, Scale, SumOfSquares; the GEMM is cuBLAS, in
// cuda_transformer_compute.cc). Attention's kernels are in
// cuda_attention_kernels.cu, the rest in cuda_transformer_kernels.cu. Each host
// function launches on `stream` and returns the launch check (Internal naming
// the kernel, base/cuda_status.h). Pointers are CUDA device memory; the caller
// has made the right device current and checked the shapes of
// train/compute/compute.h, whose docstrings are the contract.
//
// Determinism: no kernel uses atomics, and none splits a sum across threads
// in a way that depends on the launch: a row's reductions run in one block
// (or one warp) through a fixed-shape tree, a column's sums in one thread in
// row order, so the same inputs give the same bits every run.
//
// Agreement with CpuCompute: Add, Scale and the embedding are single rounded
// operations in the contract's order, so they match bit for bit. The
// reductions use trees where the CPU runs loops, and CUDA's expf and logf
// differ from glibc's by an ulp or two, so those agree to ~1e-6 relative.
//
// Built only with CUDA (STRATA_HAVE_CUDA); include only from CUDA-built files.
#ifndef STRATA_TRAIN_COMPUTE_CUDA_CUDA_TRANSFORMER_KERNELS_H_
#define STRATA_TRAIN_COMPUTE_CUDA_CUDA_TRANSFORMER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace strata::train::kernels {

// LayerNorm of N > 0 rows of C > 0, mean and rstd saved (compute.h).
absl::Status LayerNormForward(const float* x, const float* weight,
                              const float* bias, float* out, float* mean,
                              float* rstd, int64_t N, int64_t C,
                              cudaStream_t stream);

// dx +=, dweight += and dbias += for N > 0 rows of C > 0 (compute.h).
absl::Status LayerNormBackward(const float* x, const float* weight,
                               const float* mean, const float* rstd,
                               const float* dout, float* dx, float* dweight,
                               float* dbias, int64_t N, int64_t C,
                               cudaStream_t stream);

// Causal attention of compute.h for B, T > 0 and H >= 1 dividing C > 0.
absl::Status AttentionForward(const float* qkv, float* out, float* lse,
                              int64_t B, int64_t T, int64_t C, int64_t H,
                              cudaStream_t stream);

// Its gradient into dqkv (overwritten). `scratch` holds B * H * T floats
// (each query row's D_t = dout_t . out_t).
absl::Status AttentionBackward(const float* qkv, const float* out,
                               const float* dout, const float* lse, float* dqkv,
                               int64_t B, int64_t T, int64_t C, int64_t H,
                               float* scratch, cudaStream_t stream);

// out[b, t] = wte[tokens[b, t]] + wpe[t] for B T > 0 rows of C > 0. A token
// outside [0, V) (which the caller rules out) reads nothing and gives a NaN
// row.
absl::Status EmbeddingForward(const int32_t* tokens, const float* wte,
                              const float* wpe, float* out, int64_t B,
                              int64_t T, int64_t C, int64_t V,
                              cudaStream_t stream);

// dwte[tokens[n]] += dout[n] in order of n, dwpe[t] += dout[b, t] in order
// of b. A token outside [0, V) contributes nothing to dwte.
absl::Status EmbeddingBackward(const int32_t* tokens, const float* dout,
                               float* dwte, float* dwpe, int64_t B, int64_t T,
                               int64_t C, int64_t V, cudaStream_t stream);

// Sliced cross-entropy of rows > 0 rows of V > 0 logits. First sets
// *first_bad to the first row whose target is outside [0, V), or -1; only if
// it is -1 does it then write each row's loss into row_loss[rows] and, unless
// dlogits is null, (softmax - onehot) * grad_scale into dlogits (which may
// equal logits).
absl::Status CrossEntropy(const float* logits, const int32_t* targets,
                          float* dlogits, int64_t rows, int64_t V,
                          float grad_scale, long long* first_bad,
                          float* row_loss, cudaStream_t stream);

// out[i] = a[i] + b[i] and x[i] *= s on n > 0 elements, each one IEEE
// operation (out may alias a or b).
absl::Status Add(const float* a, const float* b, float* out, int64_t n,
                 cudaStream_t stream);
absl::Status Scale(float* x, float s, int64_t n, cudaStream_t stream);

// How many partial sums SumOfSquaresPartials writes for n > 0 elements: a
// function of n alone (at most kMaxSumOfSquaresBlocks), so the grid, and
// with it every partial's bits, is the same each call.
inline constexpr int kMaxSumOfSquaresBlocks = 1024;
int SumOfSquaresBlocks(int64_t n);

// partials[blk] = the sum of x[i]^2 in double over block blk's share of n > 0
// elements, for blk < SumOfSquaresBlocks(n); the caller adds the partials
// in order.
absl::Status SumOfSquaresPartials(const float* x, int64_t n, double* partials,
                                  cudaStream_t stream);

}  // namespace strata::train::kernels

#endif  // STRATA_TRAIN_COMPUTE_CUDA_CUDA_TRANSFORMER_KERNELS_H_
