// cuda_compute.h: CudaCompute, the Compute over CUDA device memory (see
// compute.h for the contract). cuda_compute.cc holds the MLP's operations and
// MakeCudaCompute, the only way to make one; cuda_transformer_compute.cc the
// transformer's. Internal to train/: include only from CUDA-built files
// (STRATA_HAVE_CUDA).
//
// Row-major matrices are handed to column-major cuBLAS as their transposes:
// a row-major [r x c] array is a column-major [c x r] one with ld = c, so
// y = x w^T becomes y^T = w x^T with the operands' roles read off that.
//
// Determinism: cuBLAS runs in CUBLAS_DEFAULT_MATH (full fp32, no TF32) on one
// stream, which cuBLAS documents as bitwise reproducible on the same GPU
// model; the kernels (cuda_kernels.h, cuda_transformer_kernels.h) use no
// atomics and fixed reduction orders.
//
// Scratch (per-row softmax results and losses, attention's D_t, the partial
// sums of squares) is cudaMalloc'd on first use and grown by doubling;
// growing waits for the stream so no kernel still reads it.
//
// Thread safety: one CudaCompute serves one thread at a time (it owns one
// stream, one cuBLAS handle and the scratch); use one per thread.
#ifndef STRATA_TRAIN_COMPUTE_CUDA_CUDA_COMPUTE_H_
#define STRATA_TRAIN_COMPUTE_CUDA_CUDA_COMPUTE_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/cuda_status.h"
#include "train/compute/compute.h"
#include "train/compute/cuda/cuda_kernels.h"

namespace strata::train {

// compute.h's Compute on CUDA device `device`, with its own stream and
// cuBLAS handle. Made (and Init'ed) by MakeCudaCompute.
class CudaCompute final : public Compute {
 public:
  CudaCompute(int device, std::string gpu_name)
      : device_(device), name_("cublas:" + std::move(gpu_name)) {}
  ~CudaCompute() override;
  CudaCompute(const CudaCompute&) = delete;
  CudaCompute& operator=(const CudaCompute&) = delete;

  // Creates the stream, the cuBLAS handle and the result buffers.
  absl::Status Init();

  std::string name() const override { return name_; }
  void* stream() const override { return stream_; }

  absl::Status LinearForward(const float* x, const float* w, const float* bias,
                             float* y, int64_t batch, int64_t in,
                             int64_t out) override;
  absl::Status LinearBackward(const float* x, const float* w, const float* dy,
                              float* dw, float* db, float* dx, int64_t batch,
                              int64_t in, int64_t out,
                              bool accumulate) override;
  absl::Status ActivationForward(Activation act, const float* z, float* a,
                                 int64_t n) override;
  absl::Status ActivationBackward(Activation act, const float* z,
                                  const float* da, float* dz,
                                  int64_t n) override;
  absl::StatusOr<LossResult> SoftmaxCrossEntropy(const float* logits,
                                                 const int32_t* labels,
                                                 float* dlogits, int64_t batch,
                                                 int64_t classes) override;
  absl::Status Adam(const AdamParams& p, float* w, float* m, float* v,
                    const float* g, int64_t n) override;
  absl::Status Copy(const float* src, float* dst, int64_t n) override;
  absl::Status Zero(float* x, int64_t n) override;
  // The transformer's operations (cuda_transformer_kernels.h).
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb,
                    float beta, float* c, int64_t ldc) override;
  absl::Status LayerNormForward(const float* x, const float* weight,
                                const float* bias, float* out, float* mean,
                                float* rstd, int64_t N, int64_t C) override;
  absl::Status LayerNormBackward(const float* x, const float* weight,
                                 const float* mean, const float* rstd,
                                 const float* dout, float* dx, float* dweight,
                                 float* dbias, int64_t N, int64_t C) override;
  absl::Status AttentionForward(const float* qkv, float* out, float* lse,
                                int64_t B, int64_t T, int64_t C,
                                int64_t H) override;
  absl::Status AttentionBackward(const float* qkv, const float* out,
                                 const float* dout, const float* lse,
                                 float* dqkv, int64_t B, int64_t T, int64_t C,
                                 int64_t H) override;
  absl::Status EmbeddingForward(const int32_t* tokens, const float* wte,
                                const float* wpe, float* out, int64_t B,
                                int64_t T, int64_t C, int64_t V) override;
  absl::Status EmbeddingBackward(const int32_t* tokens, const float* dout,
                                 float* dwte, float* dwpe, int64_t B, int64_t T,
                                 int64_t C, int64_t V) override;
  absl::StatusOr<double> CrossEntropy(const float* logits,
                                      const int32_t* targets, float* dlogits,
                                      int64_t rows, int64_t V,
                                      float grad_scale) override;
  absl::Status Add(const float* a, const float* b, float* out,
                   int64_t n) override;
  absl::Status Scale(float* x, float s, int64_t n) override;
  absl::StatusOr<double> SumOfSquares(const float* x, int64_t n) override;
  // Mixed precision (cuda_precision_compute.cc, cuda_half_kernels.h).
  absl::Status CastToHalf(Precision type, const RoundingMode& rounding,
                          const float* src, uint16_t* dst, int64_t n) override;
  absl::Status CastToFloat(Precision type, const uint16_t* src, float* dst,
                           int64_t n) override;
  absl::StatusOr<int64_t> TakeNonFinite() override;
  absl::Status EmbeddingForward16(Precision type, const int32_t* tokens,
                                  const uint16_t* wte, const uint16_t* wpe,
                                  float* out, int64_t B, int64_t T, int64_t C,
                                  int64_t V) override;
  absl::Status LinearForward16(Precision type, const float* x,
                               const uint16_t* w, const uint16_t* bias,
                               float* y, int64_t batch, int64_t in,
                               int64_t out) override;
  absl::Status LinearBackward16(Precision type, const float* x,
                                const uint16_t* w, const float* dy, float* dw,
                                float* db, float* dx, int64_t batch, int64_t in,
                                int64_t out, bool accumulate) override;
  absl::Status AdamMixed(const AdamParams& p, const MixedAdamParams& mp,
                         float* w, float* m, float* v, const uint16_t* g16,
                         uint16_t* w16, int64_t n) override;

  absl::Status Synchronize() override;

 private:
  // Callers' threads may have another device current.
  absl::Status SetDevice() const {
    return CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
  }
  // Column-major c[m x n] = op(a) op(b) + beta c on the stream; k == 0 leaves
  // beta c, which for beta 0 means zeros.
  absl::Status ColumnMajorGemm(cublasOperation_t ta, cublasOperation_t tb,
                               int64_t m, int64_t n, int64_t k, const float* a,
                               int64_t lda, const float* b, int64_t ldb,
                               float beta, float* c, int64_t ldc);
  // ColumnMajorGemm with 16-bit a and b of `type` (CUDA_R_16BF or
  // CUDA_R_16F) and fp32 c, summed in fp32 (cublasGemmEx,
  // CUBLAS_COMPUTE_32F).
  absl::Status ColumnMajorGemm16(cublasOperation_t ta, cublasOperation_t tb,
                                 int64_t m, int64_t n, int64_t k,
                                 cudaDataType type, const uint16_t* a,
                                 int64_t lda, const uint16_t* b, int64_t ldb,
                                 float beta, float* c, int64_t ldc);
  // Rounds x[rows x cols] to nearest even in `type` into scratch at byte
  // `offset` (the operand of a 16-bit GEMM; no non-finite count).
  absl::StatusOr<uint16_t*> RoundIntoScratch(Precision type, const float* x,
                                             int64_t count, size_t offset);
  // Makes scratch_ at least `bytes` long.
  absl::Status EnsureScratch(size_t bytes);
  absl::StatusOr<int32_t> FetchLabel(const int32_t* labels, int64_t row);

  // Constant after Init.
  const int device_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  kernels::BatchResult* result_device_ = nullptr;
  kernels::BatchResult* result_host_ = nullptr;  // pinned
  // The non-finite count of CastToHalf and AdamMixed, on the device so
  // adding to it never synchronises; read back by TakeNonFinite.
  unsigned long long* nonfinite_device_ = nullptr;
  unsigned long long* nonfinite_host_ = nullptr;  // pinned
  // Grown by EnsureScratch; one operation's use at a time (the stream
  // orders them).
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CUDA_CUDA_COMPUTE_H_
