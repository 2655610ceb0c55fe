// cuda_transformer_compute.cc: CudaCompute's transformer operations (the
// GPT's): the GEMM on cuBLAS, the rest the kernels of
// cuda_transformer_kernels.cu, each checked against compute.h's contract
// here and issued on the stream. CrossEntropy and SumOfSquares copy their
// per-row losses or partial sums back and add them on the host in order, so
// the double result has one fixed summation order. Built only with the CUDA
// toolkit (STRATA_HAVE_CUDA).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cuda/cuda_compute.h"
#include "train/compute/cuda/cuda_transformer_kernels.h"

namespace strata::train {
namespace {

// InvalidArgument naming `op` if a dimension is negative: a caller bug the
// kernels' int64 loops would otherwise silently skip.
absl::Status CheckNonNegative(absl::string_view op,
                              std::initializer_list<int64_t> dims) {
  for (int64_t dim : dims) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: negative dimension %d", op, dim));
    }
  }
  return absl::OkStatus();
}

bool AnyZero(std::initializer_list<int64_t> dims) {
  for (int64_t dim : dims) {
    if (dim == 0) return true;
  }
  return false;
}

// compute.h's attention shape rule, plus no negative dimension.
absl::Status CheckHeads(int64_t B, int64_t T, int64_t C, int64_t H) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("attention", {B, T, C}));
  if (H < 1 || C % H != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention needs H >= 1 heads dividing C, got C=%d H=%d", C, H));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaCompute::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                               int64_t k, const float* a, int64_t lda,
                               const float* b, int64_t ldb, float beta,
                               float* c, int64_t ldc) {
  STRATA_RETURN_IF_ERROR(
      CheckGemmArgs(trans_a, trans_b, m, n, k, lda, ldb, beta, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  // Row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T, and a
  // row-major operand read column-major is its own transpose: so swap a and
  // b (and m and n) and keep each one's op.
  return ColumnMajorGemm(trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                         trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, b, ldb,
                         a, lda, beta, c, ldc);
}

absl::Status CudaCompute::LayerNormForward(const float* x, const float* weight,
                                           const float* bias, float* out,
                                           float* mean, float* rstd, int64_t N,
                                           int64_t C) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("layernorm", {N, C}));
  if (AnyZero({N, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::LayerNormForward(x, weight, bias, out, mean, rstd, N, C,
                                   stream_);
}

absl::Status CudaCompute::LayerNormBackward(const float* x, const float* weight,
                                            const float* mean,
                                            const float* rstd,
                                            const float* dout, float* dx,
                                            float* dweight, float* dbias,
                                            int64_t N, int64_t C) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("layernorm backward", {N, C}));
  if (AnyZero({N, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::LayerNormBackward(x, weight, mean, rstd, dout, dx, dweight,
                                    dbias, N, C, stream_);
}

absl::Status CudaCompute::AttentionForward(const float* qkv, float* out,
                                           float* lse, int64_t B, int64_t T,
                                           int64_t C, int64_t H) {
  STRATA_RETURN_IF_ERROR(CheckHeads(B, T, C, H));
  if (AnyZero({B, T, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::AttentionForward(qkv, out, lse, B, T, C, H, stream_);
}

absl::Status CudaCompute::AttentionBackward(const float* qkv, const float* out,
                                            const float* dout, const float* lse,
                                            float* dqkv, int64_t B, int64_t T,
                                            int64_t C, int64_t H) {
  STRATA_RETURN_IF_ERROR(CheckHeads(B, T, C, H));
  if (AnyZero({B, T, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_RETURN_IF_ERROR(EnsureScratch(sizeof(float) * B * H * T));
  return kernels::AttentionBackward(qkv, out, dout, lse, dqkv, B, T, C, H,
                                    static_cast<float*>(scratch_), stream_);
}

absl::Status CudaCompute::EmbeddingForward(const int32_t* tokens,
                                           const float* wte, const float* wpe,
                                           float* out, int64_t B, int64_t T,
                                           int64_t C, int64_t V) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("embedding", {B, T, C, V}));
  if (AnyZero({B, T, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::EmbeddingForward(tokens, wte, wpe, out, B, T, C, V, stream_);
}

absl::Status CudaCompute::EmbeddingBackward(const int32_t* tokens,
                                            const float* dout, float* dwte,
                                            float* dwpe, int64_t B, int64_t T,
                                            int64_t C, int64_t V) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("embedding backward", {B, T, C, V}));
  if (AnyZero({B, T, C})) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::EmbeddingBackward(tokens, dout, dwte, dwpe, B, T, C, V,
                                    stream_);
}

absl::StatusOr<double> CudaCompute::CrossEntropy(const float* logits,
                                                 const int32_t* targets,
                                                 float* dlogits, int64_t rows,
                                                 int64_t V, float grad_scale) {
  STRATA_RETURN_IF_ERROR(CheckNonNegative("cross-entropy", {rows, V}));
  if (rows == 0) return 0.0;
  STRATA_RETURN_IF_ERROR(SetDevice());
  // Scratch: the first bad row (a long long), then the rows' losses; one
  // copy brings both back.
  const size_t bytes = sizeof(long long) + sizeof(float) * rows;
  STRATA_RETURN_IF_ERROR(EnsureScratch(bytes));
  auto* first_bad = static_cast<long long*>(scratch_);
  auto* row_loss = reinterpret_cast<float*>(first_bad + 1);
  STRATA_RETURN_IF_ERROR(kernels::CrossEntropy(logits, targets, dlogits, rows,
                                               V, grad_scale, first_bad,
                                               row_loss, stream_));
  std::vector<unsigned char> host(bytes);
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), scratch_, bytes,
                                              cudaMemcpyDeviceToHost, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  long long bad = 0;
  std::memcpy(&bad, host.data(), sizeof(bad));
  if (bad >= 0) {
    STRATA_ASSIGN_OR_RETURN(int32_t target, FetchLabel(targets, bad));
    return absl::InvalidArgumentError(absl::StrFormat(
        "target %d of row %d is outside [0, %d)", target, bad, V));
  }
  // Each row's loss in float, summed in double in row order (compute.h).
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    float loss;
    std::memcpy(&loss, host.data() + sizeof(long long) + sizeof(float) * r,
                sizeof(loss));
    sum += loss;
  }
  return sum;
}

absl::Status CudaCompute::Add(const float* a, const float* b, float* out,
                              int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::Add(a, b, out, n, stream_);
}

absl::Status CudaCompute::Scale(float* x, float s, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::Scale(x, s, n, stream_);
}

absl::StatusOr<double> CudaCompute::SumOfSquares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  STRATA_RETURN_IF_ERROR(SetDevice());
  const int blocks = kernels::SumOfSquaresBlocks(n);
  STRATA_RETURN_IF_ERROR(EnsureScratch(sizeof(double) * blocks));
  auto* partials = static_cast<double*>(scratch_);
  STRATA_RETURN_IF_ERROR(
      kernels::SumOfSquaresPartials(x, n, partials, stream_));
  std::vector<double> host(blocks);
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.data(), partials,
                                              sizeof(double) * blocks,
                                              cudaMemcpyDeviceToHost, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  double sum = 0.0;
  for (double partial : host) sum += partial;
  return sum;
}

}  // namespace strata::train
