// cuda_compute.cc: CudaCompute's setup, the MLP's operations (cuBLAS sgemm
// for the linear layers, the kernels of cuda_kernels.cu for the rest) and
// MakeCudaCompute. Host code over the CUDA runtime and cuBLAS APIs; built
// only with the CUDA toolkit (STRATA_HAVE_CUDA). cuda_compute.h says how the
// row-major layout reaches cuBLAS and why the results are deterministic.
#include "train/compute/cuda/cuda_compute.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>  // the typed cudaMalloc/cudaMallocHost overloads

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "base/cublas_status.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cuda/cuda_kernels.h"

namespace strata::train {

using kernels::BatchResult;
using kernels::RowResult;

CudaCompute::~CudaCompute() {
  // Errors are ignored: there is no one left to report them to.
  (void)SetDevice();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (blas_ != nullptr) cublasDestroy(blas_);
  cudaFree(scratch_);
  cudaFree(result_device_);
  cudaFreeHost(result_host_);
  cudaFree(nonfinite_device_);
  cudaFreeHost(nonfinite_host_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status CudaCompute::Init() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasCreate(&blas_));
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasSetStream(blas_, stream_));
  STRATA_CUBLAS_RETURN_IF_ERROR(
      cublasSetPointerMode(blas_, CUBLAS_POINTER_MODE_HOST));
  // Full fp32: TF32 or emulated modes would break agreement with the CPU.
  STRATA_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  STRATA_CUDA_RETURN_IF_ERROR(cudaMalloc(&result_device_, sizeof(BatchResult)));
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(&result_host_, sizeof(BatchResult)));
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaMalloc(&nonfinite_device_, sizeof(*nonfinite_device_)));
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaMallocHost(&nonfinite_host_, sizeof(*nonfinite_host_)));
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(
      nonfinite_device_, 0, sizeof(*nonfinite_device_), stream_));
  return absl::OkStatus();
}

absl::Status CudaCompute::ColumnMajorGemm(cublasOperation_t ta,
                                          cublasOperation_t tb, int64_t m,
                                          int64_t n, int64_t k, const float* a,
                                          int64_t lda, const float* b,
                                          int64_t ldb, float beta, float* c,
                                          int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    // cuBLAS rejects ld = 0, and an empty product is zero: n columns of m,
    // ldc apart.
    if (beta == 0.0f) {
      STRATA_CUDA_RETURN_IF_ERROR(cudaMemset2DAsync(
          c, sizeof(float) * ldc, 0, sizeof(float) * m, n, stream_));
    }
    return absl::OkStatus();
  }
  const float alpha = 1.0f;
  STRATA_CUBLAS_RETURN_IF_ERROR(
      cublasSgemm(blas_, ta, tb, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), &alpha, a, static_cast<int>(lda), b,
                  static_cast<int>(ldb), &beta, c, static_cast<int>(ldc)));
  return absl::OkStatus();
}

absl::Status CudaCompute::LinearForward(const float* x, const float* w,
                                        const float* bias, float* y,
                                        int64_t batch, int64_t in,
                                        int64_t out) {
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  if (batch == 0 || out == 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_RETURN_IF_ERROR(kernels::BroadcastRows(bias, y, batch, out, stream_));
  // y^T[out x batch] = w[out x in] x^T[in x batch] + y^T.
  return ColumnMajorGemm(CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, w, in, x, in,
                         /*beta=*/1.0f, y, out);
}

absl::Status CudaCompute::LinearBackward(const float* x, const float* w,
                                         const float* dy, float* dw, float* db,
                                         float* dx, int64_t batch, int64_t in,
                                         int64_t out, bool accumulate) {
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  STRATA_RETURN_IF_ERROR(SetDevice());
  if (out > 0) {
    STRATA_RETURN_IF_ERROR(
        kernels::ColumnSums(dy, db, batch, out, accumulate, stream_));
  }
  // dw^T[in x out] = x^T[in x batch] dy[batch x out] (+ dw^T: beta 1), one
  // GEMM: cuBLAS picks kernels by shape, so row chunks would not make
  // micro-batches one batch's bits here as they do on the CPU (compute.h).
  STRATA_RETURN_IF_ERROR(
      ColumnMajorGemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, x, in, dy, out,
                      /*beta=*/accumulate ? 1.0f : 0.0f, dw, in));
  if (dx == nullptr) return absl::OkStatus();
  // dx^T[in x batch] = w^T[in x out] dy^T[out x batch].
  return ColumnMajorGemm(CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, w, in, dy,
                         out,
                         /*beta=*/0.0f, dx, in);
}

absl::Status CudaCompute::ActivationForward(Activation act, const float* z,
                                            float* a, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::ActivationForward(act, z, a, n, stream_);
}

absl::Status CudaCompute::ActivationBackward(Activation act, const float* z,
                                             const float* da, float* dz,
                                             int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::ActivationBackward(act, z, da, dz, n, stream_);
}

absl::Status CudaCompute::EnsureScratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return absl::OkStatus();
  const size_t capacity = std::max(bytes, 2 * scratch_bytes_);
  // Earlier kernels on the stream may still read the old buffer.
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaFree(scratch_));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, capacity));
  scratch_bytes_ = capacity;
  return absl::OkStatus();
}

// The bad label itself, for the error message (the error path only).
absl::StatusOr<int32_t> CudaCompute::FetchLabel(const int32_t* labels,
                                                int64_t row) {
  int32_t label = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
      &label, labels + row, sizeof(label), cudaMemcpyDeviceToHost, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return label;
}

absl::StatusOr<LossResult> CudaCompute::SoftmaxCrossEntropy(
    const float* logits, const int32_t* labels, float* dlogits, int64_t batch,
    int64_t classes) {
  if (batch < 0 || classes <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "softmax cross-entropy needs batch >= 0 and classes > 0, got "
        "batch=%d classes=%d",
        batch, classes));
  }
  if (batch == 0) return LossResult{};
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_RETURN_IF_ERROR(EnsureScratch(sizeof(RowResult) * batch));
  STRATA_RETURN_IF_ERROR(kernels::SoftmaxLoss(
      logits, labels, dlogits, batch, classes,
      static_cast<RowResult*>(scratch_), result_device_, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(result_host_, result_device_,
                                              sizeof(BatchResult),
                                              cudaMemcpyDeviceToHost, stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  const BatchResult result = *result_host_;
  if (result.first_bad_row >= 0) {
    STRATA_ASSIGN_OR_RETURN(int32_t label,
                            FetchLabel(labels, result.first_bad_row));
    return absl::InvalidArgumentError(
        absl::StrFormat("label %d of row %d is outside [0, %d)", label,
                        result.first_bad_row, classes));
  }
  return LossResult{result.loss_sum, static_cast<int64_t>(result.correct)};
}

absl::Status CudaCompute::Adam(const AdamParams& p, float* w, float* m,
                               float* v, const float* g, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return kernels::Adam(p, w, m, v, g, n, stream_);
}

absl::Status CudaCompute::Copy(const float* src, float* dst, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return CudaStatus(cudaMemcpyAsync(dst, src, n * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream_),
                    "cudaMemcpyAsync");
}

absl::Status CudaCompute::Zero(float* x, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  return CudaStatus(cudaMemsetAsync(x, 0, n * sizeof(float), stream_),
                    "cudaMemsetAsync");
}

absl::Status CudaCompute::Synchronize() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

absl::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no CUDA device (%s)", CudaErrorText(err)));
  }
  if (device < 0 || device >= count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no CUDA device %d (cudaGetDeviceCount found %d)", device, count));
  }
  cudaDeviceProp prop{};
  STRATA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  auto compute = std::make_unique<CudaCompute>(device, prop.name);
  STRATA_RETURN_IF_ERROR(compute->Init());
  return std::unique_ptr<Compute>(std::move(compute));
}

}  // namespace strata::train
