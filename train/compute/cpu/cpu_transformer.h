// cpu_transformer.h: the CPU references of the transformer's operations
// (compute.h's Gemm .. SumOfSquares), what CpuCompute runs and what the CUDA
// kernels are checked against. Each has the contract of the Compute method of
// the same name; the notes here say only how the CPU meets it.
//
// Determinism: every output element is computed by one thread, in an order
// fixed by the shapes alone, so the bits do not depend on the pool's thread
// count, on how ParallelFor cuts the work or on timing. Row-wise work
// (LayerNorm, cross-entropy, the embedding lookup) is split by rows;
// attention by (b, h) pairs, each owning its columns of out and dqkv;
// reductions over rows (LayerNorm's dweight and dbias, the embedding's
// gradients) by column blocks, each column summed over the rows in order.
// Reductions along a row use the fixed lane order of cpu_reduce.h.
// Gemm is OpenBLAS's (fixed bits at a fixed OpenBLAS thread count).
//
// Each function takes the pool to split over (HostPool::Shared() unless a
// test passes its own) and runs on the caller alone when the work is small.
// Errors are InvalidArgument and leave every output untouched.
#ifndef STRATA_TRAIN_COMPUTE_CPU_CPU_TRANSFORMER_H_
#define STRATA_TRAIN_COMPUTE_CPU_CPU_TRANSFORMER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/precision.h"

namespace strata::train {

// A job is split over threads only in pieces of at least about this many
// float operations: a split costs each worker's wake-up, a few microseconds
// (cpu_adam.h). A guess of the order of kAdamMinElementsPerThread, not
// measured; results do not depend on it.
inline constexpr int64_t kMinFlopsPerThread = int64_t{1} << 15;

// The min_elements to give ParallelFor for items of `flops_per_item` float
// operations each: at least 1.
inline int64_t MinItemsPerThread(int64_t flops_per_item) {
  return flops_per_item >= kMinFlopsPerThread
             ? 1
             : kMinFlopsPerThread / (flops_per_item < 1 ? 1 : flops_per_item);
}

// SumOfSquaresCpu sums blocks of this many elements, each in double, then the
// block sums in order: the order depends on n alone.
inline constexpr int64_t kSumOfSquaresBlock = 4096;

// Compute::Gemm through cblas_sgemm (row-major, alpha 1). k == 0 writes zeros
// (beta 0) or leaves c (beta 1), since BLAS would leave c alone for k == 0.
// Also InvalidArgument for a leading dimension smaller than its matrix's row.
absl::Status GemmCpu(bool trans_a, bool trans_b, int64_t m, int64_t n,
                     int64_t k, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float beta, float* c, int64_t ldc);

// Compute::LayerNormForward. Two passes over each row, in float with the
// lane order of cpu_reduce.h: mean = sum(x) / C, then var = sum((x -
// mean)^2) / C (no cancellation, unlike E[x^2] - mean^2). Also
// InvalidArgument for N < 0 or C < 1.
absl::Status LayerNormForwardCpu(const float* x, const float* weight,
                                 const float* bias, float* out, float* mean,
                                 float* rstd, int64_t N, int64_t C,
                                 HostPool& pool = HostPool::Shared());

// Compute::EmbeddingForward16, with EmbeddingForwardCpu's errors (and
// InvalidArgument for a `type` other than kBf16 or kFp16).
absl::Status EmbeddingForward16Cpu(Precision type, const int32_t* tokens,
                                   const uint16_t* wte, const uint16_t* wpe,
                                   float* out, int64_t B, int64_t T, int64_t C,
                                   int64_t V,
                                   HostPool& pool = HostPool::Shared());

// Compute::LayerNormBackward, as llm.c's layernorm_backward: with
// norm = (x - mean) rstd and dnorm = dout * weight,
//   dx += rstd (dnorm - mean(dnorm) - norm mean(dnorm norm)),
//   dweight += sum over rows of dout norm,  dbias += sum over rows of dout.
// dx by rows in parallel; dweight and dbias by column blocks, each column
// accumulated into the caller's value row after row.
absl::Status LayerNormBackwardCpu(const float* x, const float* weight,
                                  const float* mean, const float* rstd,
                                  const float* dout, float* dx, float* dweight,
                                  float* dbias, int64_t N, int64_t C,
                                  HostPool& pool = HostPool::Shared());

// Compute::AttentionForward, one (b, h) pair per piece of work and O(T)
// scratch per piece: the scores of one query at a time, softmax by max, sum
// of exponentials (lse = max + log(sum)), then out_t = sum_j p_j v_j in j
// order. Also InvalidArgument for B, T < 0 or C < 1.
absl::Status AttentionForwardCpu(const float* qkv, float* out, float* lse,
                                 int64_t B, int64_t T, int64_t C, int64_t H,
                                 HostPool& pool = HostPool::Shared());

// Compute::AttentionBackward per (b, h) pair: zeroes the pair's columns of
// dqkv, then for t = 0 .. T - 1 recomputes p_j = exp(s_j - lse_t) and adds
// each query's contribution to dq_t, dk_j and dv_j (j <= t), so dk and dv
// gather their terms in order of t.
absl::Status AttentionBackwardCpu(const float* qkv, const float* out,
                                  const float* dout, const float* lse,
                                  float* dqkv, int64_t B, int64_t T, int64_t C,
                                  int64_t H,
                                  HostPool& pool = HostPool::Shared());

// Compute::EmbeddingForward; InvalidArgument naming the first position whose
// token is outside [0, V), before anything is written.
absl::Status EmbeddingForwardCpu(const int32_t* tokens, const float* wte,
                                 const float* wpe, float* out, int64_t B,
                                 int64_t T, int64_t C, int64_t V,
                                 HostPool& pool = HostPool::Shared());

// Compute::EmbeddingBackward by column blocks of C, each column of dwte and
// dwpe gathering its rows in order n (resp. b). Checks the tokens as the
// forward does (a bad one would write outside dwte).
absl::Status EmbeddingBackwardCpu(const int32_t* tokens, const float* dout,
                                  float* dwte, float* dwpe, int64_t B,
                                  int64_t T, int64_t C, int64_t V,
                                  HostPool& pool = HostPool::Shared());

// Compute::CrossEntropy: rows in parallel, each row's loss in float into a
// buffer, then the buffer summed in double in row order. Also
// InvalidArgument for rows < 0 or V < 1.
absl::StatusOr<double> CrossEntropyCpu(const float* logits,
                                       const int32_t* targets, float* dlogits,
                                       int64_t rows, int64_t V,
                                       float grad_scale,
                                       HostPool& pool = HostPool::Shared());

// Compute::Add (out may equal a or b); elementwise, so any split gives the
// same bits. n <= 0 does nothing.
void AddCpu(const float* a, const float* b, float* out, int64_t n,
            HostPool& pool = HostPool::Shared());

// ScaleCpu (compute.h) over `pool`.
void ScaleCpuWith(float* x, float s, int64_t n, HostPool& pool);

// Compute::SumOfSquares in blocks of kSumOfSquaresBlock (0 for n <= 0).
double SumOfSquaresCpu(const float* x, int64_t n,
                       HostPool& pool = HostPool::Shared());

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_CPU_TRANSFORMER_H_
