// cuda_compute.cu: CudaCompute, the Compute over CUDA device memory — cuBLAS
// sgemm for the linear layers and small kernels for the rest — and
// MakeCudaCompute. Built only with the CUDA toolkit (STRATA_HAVE_CUDA).
//
// Row-major matrices are handed to column-major cuBLAS as their transposes:
// a row-major [r x c] array is a column-major [c x r] one with ld = c, so
// y = x w^T becomes y^T = w x^T with the operands' roles read off that.
//
// Determinism and agreement with CpuCompute:
//  - cuBLAS runs in CUBLAS_DEFAULT_MATH (full fp32, no TF32) on one stream,
//    which cuBLAS documents as bitwise reproducible on the same GPU model.
//  - No kernel uses atomics: the bias gradient sums each column's rows in
//    order (one thread per column, the same order and bits as the CPU), and
//    the batch loss is a fixed-shape tree over one block.
//  - The build passes --fmad=false, and the Adam kernel spells each step with
//    the _rn intrinsics, so it matches AdamUpdateCpu bit for bit.
//  - Activations and softmax use the same formulas as the CPU; CUDA's erfcf,
//    expf and logf differ from glibc's by an ulp or two, so those agree to
//    ~1e-6 relative, not bitwise.
//
// Scratch (per-row softmax results) is cudaMalloc'd on first use and grown
// by doubling; growing waits for the stream so no kernel still reads it.
//
// Thread safety: one CudaCompute serves one thread at a time (it owns one
// stream, one cuBLAS handle and the scratch); use one per thread.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute.h"

namespace strata::train {
namespace {

constexpr int kBlockThreads = 256;
// Grid-stride loops cover the rest; 8192 blocks of 256 fill any current GPU.
constexpr int64_t kMaxBlocks = 8192;
// The loss reduction runs in one block of this many threads (a power of 2).
constexpr int kReduceThreads = 256;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// Per-row softmax outcome, reduced on the device in a fixed order.
enum RowFlag : int32_t { kRowWrong = 0, kRowRight = 1, kRowBadLabel = 2 };
struct RowResult {
  float loss;
  int32_t flag;
};
// What one SoftmaxCrossEntropy call copies back to the host.
struct BatchResult {
  double loss_sum;
  long long correct;
  long long first_bad_row;  // -1: every label in range
};

// Also clears the calling thread's last error so that a later launch check
// does not report this one again.
std::string Describe(cudaError_t err) {
  cudaGetLastError();
  return absl::StrFormat("%s: %s", cudaGetErrorName(err),
                         cudaGetErrorString(err));
}

absl::Status CudaCheck(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s failed: %s", call, Describe(err)));
}

absl::Status BlasCheck(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s failed: %s: %s", call,
                                             cublasGetStatusName(status),
                                             cublasGetStatusString(status)));
}

// A kernel launch reports bad configurations only through cudaGetLastError.
absl::Status LaunchCheck(const char* kernel) {
  return CudaCheck(cudaGetLastError(), kernel);
}

#define STRATA_CUDA_RETURN_IF_ERROR(call) \
  STRATA_RETURN_IF_ERROR(CudaCheck((call), #call))
#define STRATA_CUBLAS_RETURN_IF_ERROR(call) \
  STRATA_RETURN_IF_ERROR(BlasCheck((call), #call))

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

// y[i][j] = bias[j] for every row; the sgemm then adds x w^T with beta = 1.
__global__ void BroadcastRowsKernel(const float* bias, float* y, int64_t rows,
                                    int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = GridIndex(); i < n; i += GridStride()) y[i] = bias[i % cols];
}

// db[j] = dy[0][j] + dy[1][j] + ... in row order, as on the CPU. Adjacent
// threads read adjacent columns, so each row is read coalesced.
__global__ void ColumnSumsKernel(const float* dy, float* db, int64_t rows,
                                 int64_t cols) {
  for (int64_t j = GridIndex(); j < cols; j += GridStride()) {
    float sum = 0.0f;
    for (int64_t i = 0; i < rows; ++i) sum = __fadd_rn(sum, dy[i * cols + j]);
    db[j] = sum;
  }
}

// GELU through erfc, as CpuCompute (see Gelu there for why not 1 + erf).
__device__ float GeluDevice(float z) {
  return 0.5f * z * erfcf(-z * kInvSqrt2);
}
__device__ float GeluGradDevice(float z) {
  const float cdf = 0.5f * erfcf(-z * kInvSqrt2);  // normcdff(z)
  const float pdf = kInvSqrt2Pi * expf(-0.5f * z * z);
  return cdf + z * pdf;
}

template <Activation kAct>
__global__ void ActivationForwardKernel(const float* z, float* a, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const float zi = z[i];
    if constexpr (kAct == Activation::kRelu) {
      a[i] = zi > 0.0f ? zi : 0.0f;
    } else {
      a[i] = GeluDevice(zi);
    }
  }
}

template <Activation kAct>
__global__ void ActivationBackwardKernel(const float* z, const float* da,
                                         float* dz, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const float zi = z[i];
    if constexpr (kAct == Activation::kRelu) {
      dz[i] = zi > 0.0f ? da[i] : 0.0f;
    } else {
      dz[i] = da[i] * GeluGradDevice(zi);
    }
  }
}

// One thread per row, the CPU's loop order: first maximum, exp sum, loss,
// then (softmax - onehot) / batch into dlogits unless it is null. A row with
// a bad label is flagged and its dlogits row left untouched.
__global__ void SoftmaxRowsKernel(const float* logits, const int32_t* labels,
                                  float* dlogits, int64_t batch,
                                  int64_t classes, RowResult* rows) {
  for (int64_t i = GridIndex(); i < batch; i += GridStride()) {
    const int32_t label = labels[i];
    if (label < 0 || label >= classes) {
      rows[i] = RowResult{0.0f, kRowBadLabel};
      continue;
    }
    const float* z = logits + i * classes;
    float* d = dlogits == nullptr ? nullptr : dlogits + i * classes;
    int64_t argmax = 0;
    for (int64_t j = 1; j < classes; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    const float max = z[argmax];
    float sum = 0.0f;
    for (int64_t j = 0; j < classes; ++j) {
      const float e = expf(z[j] - max);
      if (d != nullptr) d[j] = e;
      sum += e;
    }
    const float loss = logf(sum) - (z[label] - max);
    if (d != nullptr) {
      const float scale = static_cast<float>(batch);
      for (int64_t j = 0; j < classes; ++j) {
        const float onehot = j == label ? 1.0f : 0.0f;
        d[j] = (d[j] / sum - onehot) / scale;
      }
    }
    rows[i] = RowResult{loss, argmax == label ? kRowRight : kRowWrong};
  }
}

// One block of kReduceThreads: each thread folds rows t, t + T, ... in order,
// then a fixed tree combines the threads. Same shape every call, same bits.
__global__ void ReduceRowsKernel(const RowResult* rows, int64_t batch,
                                 BatchResult* out) {
  __shared__ double loss[kReduceThreads];
  __shared__ long long correct[kReduceThreads];
  __shared__ long long first_bad[kReduceThreads];
  const int t = threadIdx.x;
  double l = 0.0;
  long long c = 0;
  long long bad = batch;  // none yet
  for (int64_t i = t; i < batch; i += kReduceThreads) {
    const RowResult r = rows[i];
    l += static_cast<double>(r.loss);
    c += r.flag == kRowRight ? 1 : 0;
    if (r.flag == kRowBadLabel && bad == batch) bad = i;
  }
  loss[t] = l;
  correct[t] = c;
  first_bad[t] = bad;
  __syncthreads();
  for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
    if (t < s) {
      loss[t] += loss[t + s];
      correct[t] += correct[t + s];
      first_bad[t] = min(first_bad[t], first_bad[t + s]);
    }
    __syncthreads();
  }
  if (t == 0) {
    *out = BatchResult{loss[0], correct[0],
                       first_bad[0] == batch ? -1 : first_bad[0]};
  }
}

// The Adam scalars, hoisted on the host in float as AdamUpdateCpu does.
struct AdamScalars {
  float lr, beta1, beta2, one_minus_beta1, one_minus_beta2, eps, c1, c2;
};

// AdamUpdateCpu's loop body, every operation a separately rounded
// round-to-nearest op so nothing is fused or approximated.
__global__ void AdamKernel(AdamScalars s, float* w, float* m, float* v,
                           const float* g, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const float gi = g[i];
    const float mi =
        __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, gi));
    const float vi = __fadd_rn(__fmul_rn(s.beta2, v[i]),
                               __fmul_rn(__fmul_rn(s.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, s.c2)), s.eps);
    const float step = __fdiv_rn(__fmul_rn(s.lr, __fmul_rn(mi, s.c1)), denom);
    w[i] = __fsub_rn(w[i], step);
  }
}

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
                              int64_t in, int64_t out) override;
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
  absl::Status Synchronize() override;

 private:
  // Callers' threads may have another device current.
  absl::Status SetDevice() const {
    return CudaCheck(cudaSetDevice(device_), "cudaSetDevice");
  }
  // Column-major c[m x n] = op(a) op(b) + beta c on the stream; k == 0 leaves
  // beta c, which for beta 0 means zeros.
  absl::Status Gemm(cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                    int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc);
  absl::Status EnsureRowScratch(int64_t rows);
  absl::StatusOr<int32_t> FetchLabel(const int32_t* labels, int64_t row);

  // Constant after Init.
  const int device_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  BatchResult* result_device_ = nullptr;
  BatchResult* result_host_ = nullptr;  // pinned
  // Grown by EnsureRowScratch.
  RowResult* rows_ = nullptr;
  int64_t rows_capacity_ = 0;
};

CudaCompute::~CudaCompute() {
  // Errors are ignored: there is no one left to report them to.
  (void)SetDevice();
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (blas_ != nullptr) cublasDestroy(blas_);
  cudaFree(rows_);
  cudaFree(result_device_);
  cudaFreeHost(result_host_);
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
  return absl::OkStatus();
}

absl::Status CudaCompute::Gemm(cublasOperation_t ta, cublasOperation_t tb,
                               int64_t m, int64_t n, int64_t k, const float* a,
                               int64_t lda, const float* b, int64_t ldb,
                               float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    // cuBLAS rejects ld = 0, and an empty product is zero.
    if (beta == 0.0f) {
      STRATA_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(c, 0, sizeof(float) * m * n, stream_));
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
  BroadcastRowsKernel<<<Blocks(batch * out), kBlockThreads, 0, stream_>>>(
      bias, y, batch, out);
  STRATA_RETURN_IF_ERROR(LaunchCheck("BroadcastRowsKernel"));
  // y^T[out x batch] = w[out x in] x^T[in x batch] + y^T.
  return Gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in, w, in, x, in,
              /*beta=*/1.0f, y, out);
}

absl::Status CudaCompute::LinearBackward(const float* x, const float* w,
                                         const float* dy, float* dw, float* db,
                                         float* dx, int64_t batch, int64_t in,
                                         int64_t out) {
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  STRATA_RETURN_IF_ERROR(SetDevice());
  if (out > 0) {
    ColumnSumsKernel<<<Blocks(out), kBlockThreads, 0, stream_>>>(dy, db, batch,
                                                                 out);
    STRATA_RETURN_IF_ERROR(LaunchCheck("ColumnSumsKernel"));
  }
  // dw^T[in x out] = x^T[in x batch] dy[batch x out].
  STRATA_RETURN_IF_ERROR(Gemm(CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, x, in,
                              dy, out, /*beta=*/0.0f, dw, in));
  if (dx == nullptr) return absl::OkStatus();
  // dx^T[in x batch] = w^T[in x out] dy^T[out x batch].
  return Gemm(CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out, w, in, dy, out,
              /*beta=*/0.0f, dx, in);
}

absl::Status CudaCompute::ActivationForward(Activation act, const float* z,
                                            float* a, int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  switch (act) {
    case Activation::kRelu:
      ActivationForwardKernel<Activation::kRelu>
          <<<Blocks(n), kBlockThreads, 0, stream_>>>(z, a, n);
      return LaunchCheck("ActivationForwardKernel<kRelu>");
    case Activation::kGelu:
      ActivationForwardKernel<Activation::kGelu>
          <<<Blocks(n), kBlockThreads, 0, stream_>>>(z, a, n);
      return LaunchCheck("ActivationForwardKernel<kGelu>");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown activation %d", static_cast<int>(act)));
}

absl::Status CudaCompute::ActivationBackward(Activation act, const float* z,
                                             const float* da, float* dz,
                                             int64_t n) {
  if (n <= 0) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  switch (act) {
    case Activation::kRelu:
      ActivationBackwardKernel<Activation::kRelu>
          <<<Blocks(n), kBlockThreads, 0, stream_>>>(z, da, dz, n);
      return LaunchCheck("ActivationBackwardKernel<kRelu>");
    case Activation::kGelu:
      ActivationBackwardKernel<Activation::kGelu>
          <<<Blocks(n), kBlockThreads, 0, stream_>>>(z, da, dz, n);
      return LaunchCheck("ActivationBackwardKernel<kGelu>");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown activation %d", static_cast<int>(act)));
}

absl::Status CudaCompute::EnsureRowScratch(int64_t rows) {
  if (rows <= rows_capacity_) return absl::OkStatus();
  const int64_t capacity = std::max(rows, 2 * rows_capacity_);
  // Earlier kernels on the stream may still read the old buffer.
  STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  STRATA_CUDA_RETURN_IF_ERROR(cudaFree(rows_));
  rows_ = nullptr;
  rows_capacity_ = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMalloc(&rows_, sizeof(RowResult) * capacity));
  rows_capacity_ = capacity;
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
  STRATA_RETURN_IF_ERROR(EnsureRowScratch(batch));
  SoftmaxRowsKernel<<<Blocks(batch), kBlockThreads, 0, stream_>>>(
      logits, labels, dlogits, batch, classes, rows_);
  STRATA_RETURN_IF_ERROR(LaunchCheck("SoftmaxRowsKernel"));
  ReduceRowsKernel<<<1, kReduceThreads, 0, stream_>>>(rows_, batch,
                                                      result_device_);
  STRATA_RETURN_IF_ERROR(LaunchCheck("ReduceRowsKernel"));
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
  const AdamScalars s{p.lr,           p.beta1, p.beta2,       1.0f - p.beta1,
                      1.0f - p.beta2, p.eps,   p.correction1, p.correction2};
  AdamKernel<<<Blocks(n), kBlockThreads, 0, stream_>>>(s, w, m, v, g, n);
  return LaunchCheck("AdamKernel");
}

absl::Status CudaCompute::Synchronize() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  return CudaCheck(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("no CUDA device (%s)", Describe(err)));
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

#undef STRATA_CUDA_RETURN_IF_ERROR
#undef STRATA_CUBLAS_RETURN_IF_ERROR

}  // namespace strata::train
