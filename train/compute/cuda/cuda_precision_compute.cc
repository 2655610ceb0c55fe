// cuda_precision_compute.cc: CudaCompute's mixed-precision operations
// (compute.h): casts and the fused Adam pass through cuda_half_kernels.h,
// 16-bit linear layers through cublasGemmEx with bf16/fp16 operands and
// fp32 accumulation. Built only with the CUDA toolkit (STRATA_HAVE_CUDA).
//
// A linear layer's fp32 operands (x, dy) are rounded to 16 bits into the
// compute's scratch (cudaMalloc'd, grown by doubling, cuda_compute.h), at
// most batch x (in + out) 16-bit values; the weights are 16-bit already.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cublas_status.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cuda/cuda_compute.h"
#include "train/compute/cuda/cuda_half_kernels.h"
#include "train/compute/cuda/cuda_kernels.h"

namespace strata::train {
namespace {

cudaDataType CudaType(Precision type) {
  return type == Precision::kFp16 ? CUDA_R_16F : CUDA_R_16BF;
}

// Scratch offsets stay 256-byte aligned, as cuBLAS prefers.
size_t AlignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

absl::Status CudaCompute::CastToHalf(Precision type,
                                     const RoundingMode& rounding,
                                     const float* src, uint16_t* dst,
                                     int64_t n) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, n, "CastToHalf"));
  if (n == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::CastToHalf(type, rounding, src, dst, n, nonfinite_device_,
                             stream_);
}

absl::Status CudaCompute::CastToFloat(Precision type, const uint16_t* src,
                                      float* dst, int64_t n) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, n, "CastToFloat"));
  if (n == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::CastToFloat(type, src, dst, n, stream_);
}

absl::StatusOr<int64_t> CudaCompute::TakeNonFinite() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      nonfinite_host_, nonfinite_device_, sizeof(*nonfinite_host_),
      cudaMemcpyDeviceToHost, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      nonfinite_device_, 0, sizeof(*nonfinite_device_), stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return static_cast<int64_t>(*nonfinite_host_);
}

absl::Status CudaCompute::ColumnMajorGemm16(
    cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
    cudaDataType type, const uint16_t* a, int64_t lda, const uint16_t* b,
    int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    if (beta == 0.0f) {
      STRATA_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(
          c, sizeof(float) * ldc, 0, sizeof(float) * m, n, stream_));
    }
    return absl::OkStatus();
  }
  const float alpha = 1.0f;
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasGemmEx(
      blas_, ta, tb, static_cast<int>(m), static_cast<int>(n),
      static_cast<int>(k), &alpha, a, type, static_cast<int>(lda), b, type,
      static_cast<int>(ldb), &beta, c, CUDA_R_32F, static_cast<int>(ldc),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::StatusOr<uint16_t*> CudaCompute::RoundIntoScratch(Precision type,
                                                        const float* x,
                                                        int64_t count,
                                                        size_t offset) {
  auto* dst =
      reinterpret_cast<uint16_t*>(static_cast<char*>(scratch_) + offset);
  if (count > 0) {
    STRATA_RETURN_IF_ERROR(kernels::CastToHalf(type, RoundingMode{}, x, dst,
                                               count, nullptr, stream_));
  }
  return dst;
}

absl::Status CudaCompute::LinearForward16(Precision type, const float* x,
                                          const uint16_t* w,
                                          const uint16_t* bias, float* y,
                                          int64_t batch, int64_t in,
                                          int64_t out) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, 0, "LinearForward16"));
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  if (batch == 0 || out == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_RETURN_IF_ERROR(EnsureScratch(AlignUp(2 * batch * in) + 256));
  STRATA_ASSIGN_OR_RETURN(uint16_t * x16,
                          RoundIntoScratch(type, x, batch * in, 0));
  if (bias != nullptr) {
    STRATA_RETURN_IF_ERROR(
        kernels::BroadcastRows16(type, bias, y, batch, out, stream_));
  }
  // y^T[out x batch] = w[out x in] x^T[in x batch] (+ y^T, the bias).
  return ColumnMajorGemm16(CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in,
                           CudaType(type), w, in, x16, in,
                           /*beta=*/bias != nullptr ? 1.0f : 0.0f, y, out);
}

absl::Status CudaCompute::LinearBackward16(Precision type, const float* x,
                                           const uint16_t* w, const float* dy,
                                           float* dw, float* db, float* dx,
                                           int64_t batch, int64_t in,
                                           int64_t out, bool accumulate) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, 0, "LinearBackward16"));
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  STRATA_RETURN_IF_ERROR(SetDevice());
  if (out > 0 && db != nullptr) {
    STRATA_RETURN_IF_ERROR(
        kernels::ColumnSums(dy, db, batch, out, accumulate, stream_));
  }
  const size_t x_bytes = AlignUp(2 * batch * in);
  STRATA_RETURN_IF_ERROR(
      EnsureScratch(x_bytes + AlignUp(2 * batch * out) + 256));
  STRATA_ASSIGN_OR_RETURN(uint16_t * x16,
                          RoundIntoScratch(type, x, batch * in, 0));
  STRATA_ASSIGN_OR_RETURN(uint16_t * dy16,
                          RoundIntoScratch(type, dy, batch * out, x_bytes));
  const cudaDataType t = CudaType(type);
  // dw^T[in x out] (+)= x^T[in x batch] dy[batch x out] (one GEMM, as
  // CudaCompute::LinearBackward's).
  STRATA_RETURN_IF_ERROR(ColumnMajorGemm16(CUBLAS_OP_N, CUBLAS_OP_T, in, out,
                                           batch, t, x16, in, dy16, out,
                                           accumulate ? 1.0f : 0.0f, dw, in));
  if (dx == nullptr) return absl::OkStatus();
  // dx^T[in x batch] = w^T[in x out] dy^T[out x batch].
  return ColumnMajorGemm16(CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, t, w, in,
                           dy16, out, /*beta=*/0.0f, dx, in);
}

absl::Status CudaCompute::EmbeddingForward16(Precision type,
                                             const int32_t* tokens,
                                             const uint16_t* wte,
                                             const uint16_t* wpe, float* out,
                                             int64_t B, int64_t T, int64_t C,
                                             int64_t V) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, B * T * C, "EmbeddingForward16"));
  if (B * T * C == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::EmbeddingForward16(type, tokens, wte, wpe, out, B, T, C, V,
                                     stream_);
}

absl::Status CudaCompute::AdamMixed(const AdamParams& p,
                                    const MixedAdamParams& mp, float* w,
                                    float* m, float* v, const uint16_t* g16,
                                    uint16_t* w16, int64_t n) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(mp.type, n, "AdamMixed"));
  if (n == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::AdamMixed(p, mp, w, m, v, g16, w16, n, nonfinite_device_,
                            stream_);
}

}  // namespace strata::train
