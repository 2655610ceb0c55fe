// compute.h: the math a training step needs, on the device tier's memory.
//
// Two implementations: CpuCompute (OpenBLAS; for the simulated device, whose
// "device memory" is host memory) and CudaCompute (cuBLAS plus small kernels;
// pointers are CUDA device memory from device-tier leases). Every matrix is
// float32, row-major, dense. Work is issued on stream() and is ordered on it;
// results a caller reads on the host (loss, correct count) are synchronised.
//
// Determinism: each operation gives the same bits for the same inputs on the
// same Compute, so a run whose tensors move between tiers produces exactly the
// losses of a run where nothing moves (no atomics, fixed reduction orders).
// Across machines it need not: OpenBLAS's results depend on its thread count
// and CPU kernels, cuBLAS's on the GPU.
#ifndef STRATA_TRAIN_COMPUTE_H_
#define STRATA_TRAIN_COMPUTE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::train {

enum class Activation : uint8_t {
  kRelu,  // max(z, 0); derivative 1 for z > 0, else 0
  kGelu,  // z * Phi(z) with the exact erf form (Hendrycks & Gimpel, 2016)
};

// Adam (Kingma & Ba, 2015) with bias correction folded into two scalars the
// caller computes in double: correction1 = 1 / (1 - beta1^t),
// correction2 = 1 / (1 - beta2^t), t >= 1 the step number.
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   w = w - lr * (m * correction1) / (sqrt(v * correction2) + eps)
// Evaluated in float, in exactly this order, without fused multiply-adds, so
// the CPU and CUDA versions agree bit for bit.
struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float correction1 = 1.0f;
  float correction2 = 1.0f;
};

// CPU reference of the Adam update above on n elements; what CpuCompute runs
// and what the host-tier optimizer runs. Runs the widest vector path this CPU
// has (vector_path.h) and, for large n, splits the update over the shared
// HostPool's threads (host_pool.h); neither changes a bit (cpu_adam.h).
void AdamUpdateCpu(const AdamParams& p, float* w, float* m, float* v,
                   const float* g, int64_t n);

// Sum of the per-sample losses of a batch, and how many argmax predictions
// matched the label.
struct LossResult {
  double loss_sum = 0;
  int64_t correct = 0;
};

class Compute {
 public:
  virtual ~Compute() = default;

  // "openblas:<n>-threads" or "cublas:<GPU name>".
  virtual std::string name() const = 0;
  // The cudaStream_t work is issued on (null on the CPU). Pass it to
  // Store::Acquire and Lease::Release so the store orders its copies with
  // this work.
  virtual void* stream() const = 0;

  // y[batch x out] = x[batch x in] * w^T + bias, where w is [out x in]
  // (PyTorch's nn.Linear layout) and bias[out] is added to every row.
  virtual absl::Status LinearForward(const float* x, const float* w,
                                     const float* bias, float* y, int64_t batch,
                                     int64_t in, int64_t out) = 0;

  // Gradients of LinearForward given dy[batch x out]:
  //   dw[out x in] = dy^T * x,  db[out] = column sums of dy (rows in order),
  //   dx[batch x in] = dy * w   (skipped when dx is null: the first layer).
  virtual absl::Status LinearBackward(const float* x, const float* w,
                                      const float* dy, float* dw, float* db,
                                      float* dx, int64_t batch, int64_t in,
                                      int64_t out) = 0;

  // a[i] = act(z[i]) for n elements. a may equal z.
  virtual absl::Status ActivationForward(Activation act, const float* z,
                                         float* a, int64_t n) = 0;

  // dz[i] = da[i] * act'(z[i]) for n elements. dz may equal da.
  virtual absl::Status ActivationBackward(Activation act, const float* z,
                                          const float* da, float* dz,
                                          int64_t n) = 0;

  // Softmax cross-entropy of logits[batch x classes] against labels[batch]
  // (int32, each in [0, classes)). Returns the sum over the batch of
  // -log softmax(logits)[label] and the number of rows whose argmax (first
  // maximum) equals the label. Unless dlogits is null, writes
  // dlogits = (softmax(logits) - onehot(label)) / batch, the gradient of the
  // batch's mean loss. InvalidArgument for a label out of range.
  virtual absl::StatusOr<LossResult> SoftmaxCrossEntropy(const float* logits,
                                                         const int32_t* labels,
                                                         float* dlogits,
                                                         int64_t batch,
                                                         int64_t classes) = 0;

  // AdamUpdateCpu's update on this compute's memory.
  virtual absl::Status Adam(const AdamParams& p, float* w, float* m, float* v,
                            const float* g, int64_t n) = 0;

  // Waits until all issued work has finished; reports an asynchronous error.
  virtual absl::Status Synchronize() = 0;
};

// InvalidArgument unless batch, in and out are in [0, INT_MAX]: both BLAS
// libraries take int dimensions, so anything wider is a caller bug.
absl::Status CheckLinearDims(int64_t batch, int64_t in, int64_t out);

// OpenBLAS on host memory. `threads` bounds OpenBLAS's threads (0: its
// default).
std::unique_ptr<Compute> MakeCpuCompute(int threads = 0);

// cuBLAS and kernels on CUDA device `device` with its own stream.
// FailedPrecondition when strata was built without CUDA or that GPU does not
// answer (as OpenDeviceBackend: fix the machine or choose the CPU); Internal
// with the CUDA error's name otherwise.
absl::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device = 0);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_H_
