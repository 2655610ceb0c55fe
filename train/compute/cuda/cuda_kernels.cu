// cuda_kernels.cu: the kernels behind CudaCompute and the host functions
// that launch them (cuda_kernels.h, which says how they stay deterministic
// and agree with CpuCompute). Built only with CUDA, with --fmad=false.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/cuda/cuda_kernels.h"

namespace strata::train::kernels {
namespace {

constexpr int kBlockThreads = 256;
// Grid-stride loops cover the rest; 8192 blocks of 256 fill any current GPU.
constexpr int64_t kMaxBlocks = 8192;
// The loss reduction runs in one block of this many threads (a power of 2).
constexpr int kReduceThreads = 256;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// RowResult::flag.
enum RowFlag : int32_t { kRowWrong = 0, kRowRight = 1, kRowBadLabel = 2 };

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
// ColumnSumsInChunks (cpu_reduce.h) per column: the same adds in the same
// order.
__global__ void ColumnSumsKernel(const float* dy, float* db, int64_t rows,
                                 int64_t cols, bool accumulate) {
  for (int64_t j = GridIndex(); j < cols; j += GridStride()) {
    float total = accumulate ? db[j] : 0.0f;
    for (int64_t r0 = 0; r0 < rows; r0 += kReductionRows) {
      const int64_t end =
          r0 + kReductionRows < rows ? r0 + kReductionRows : rows;
      float sum = 0.0f;
      for (int64_t i = r0; i < end; ++i) {
        sum = __fadd_rn(sum, dy[i * cols + j]);
      }
      total = r0 == 0 && !accumulate ? sum : __fadd_rn(total, sum);
    }
    db[j] = total;
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

// GPT-2's tanh approximation, the CPU's expressions (cpu_compute.cc).
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;
__device__ float GeluTanhDevice(float z) {
  const float u = kSqrt2OverPi * (z + kGeluCubic * z * z * z);
  return 0.5f * z * (1.0f + tanhf(u));
}
__device__ float GeluTanhGradDevice(float z) {
  const float u = kSqrt2OverPi * (z + kGeluCubic * z * z * z);
  const float t = tanhf(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * z * z);
  return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * du;
}

template <Activation kAct>
__global__ void ActivationForwardKernel(const float* z, float* a, int64_t n) {
  for (int64_t i = GridIndex(); i < n; i += GridStride()) {
    const float zi = z[i];
    if constexpr (kAct == Activation::kRelu) {
      a[i] = zi > 0.0f ? zi : 0.0f;
    } else if constexpr (kAct == Activation::kGeluTanh) {
      a[i] = GeluTanhDevice(zi);
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
    } else if constexpr (kAct == Activation::kGeluTanh) {
      dz[i] = da[i] * GeluTanhGradDevice(zi);
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

}  // namespace

absl::Status BroadcastRows(const float* bias, float* y, int64_t rows,
                           int64_t cols, cudaStream_t stream) {
  BroadcastRowsKernel<<<Blocks(rows * cols), kBlockThreads, 0, stream>>>(
      bias, y, rows, cols);
  return CudaLaunchStatus("BroadcastRowsKernel");
}

absl::Status ColumnSums(const float* dy, float* db, int64_t rows, int64_t cols,
                        bool accumulate, cudaStream_t stream) {
  ColumnSumsKernel<<<Blocks(cols), kBlockThreads, 0, stream>>>(
      dy, db, rows, cols, accumulate);
  return CudaLaunchStatus("ColumnSumsKernel");
}

absl::Status ActivationForward(Activation act, const float* z, float* a,
                               int64_t n, cudaStream_t stream) {
  switch (act) {
    case Activation::kRelu:
      ActivationForwardKernel<Activation::kRelu>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, a, n);
      return CudaLaunchStatus("ActivationForwardKernel<kRelu>");
    case Activation::kGelu:
      ActivationForwardKernel<Activation::kGelu>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, a, n);
      return CudaLaunchStatus("ActivationForwardKernel<kGelu>");
    case Activation::kGeluTanh:
      ActivationForwardKernel<Activation::kGeluTanh>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, a, n);
      return CudaLaunchStatus("ActivationForwardKernel<kGeluTanh>");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown activation %d", static_cast<int>(act)));
}

absl::Status ActivationBackward(Activation act, const float* z, const float* da,
                                float* dz, int64_t n, cudaStream_t stream) {
  switch (act) {
    case Activation::kRelu:
      ActivationBackwardKernel<Activation::kRelu>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, da, dz, n);
      return CudaLaunchStatus("ActivationBackwardKernel<kRelu>");
    case Activation::kGelu:
      ActivationBackwardKernel<Activation::kGelu>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, da, dz, n);
      return CudaLaunchStatus("ActivationBackwardKernel<kGelu>");
    case Activation::kGeluTanh:
      ActivationBackwardKernel<Activation::kGeluTanh>
          <<<Blocks(n), kBlockThreads, 0, stream>>>(z, da, dz, n);
      return CudaLaunchStatus("ActivationBackwardKernel<kGeluTanh>");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown activation %d", static_cast<int>(act)));
}

absl::Status SoftmaxLoss(const float* logits, const int32_t* labels,
                         float* dlogits, int64_t batch, int64_t classes,
                         RowResult* rows, BatchResult* out,
                         cudaStream_t stream) {
  SoftmaxRowsKernel<<<Blocks(batch), kBlockThreads, 0, stream>>>(
      logits, labels, dlogits, batch, classes, rows);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("SoftmaxRowsKernel"));
  ReduceRowsKernel<<<1, kReduceThreads, 0, stream>>>(rows, batch, out);
  return CudaLaunchStatus("ReduceRowsKernel");
}

absl::Status Adam(const AdamParams& p, float* w, float* m, float* v,
                  const float* g, int64_t n, cudaStream_t stream) {
  const AdamScalars s{p.lr,           p.beta1, p.beta2,       1.0f - p.beta1,
                      1.0f - p.beta2, p.eps,   p.correction1, p.correction2};
  AdamKernel<<<Blocks(n), kBlockThreads, 0, stream>>>(s, w, m, v, g, n);
  return CudaLaunchStatus("AdamKernel");
}

}  // namespace strata::train::kernels
