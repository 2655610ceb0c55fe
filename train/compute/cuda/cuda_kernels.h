// cuda_kernels.h: the CUDA kernels behind CudaCompute (cuda_compute.cc), each
// behind a host function that launches it on `stream` and returns the launch
// check (Internal naming the kernel, base/cuda_status.h). Pointers are CUDA
// device memory; the caller has made the right device current. Shapes are
// those of the Compute interface (train/compute/compute.h) and are not checked
// here.
//
// Determinism and agreement with CpuCompute:
//  - No kernel uses atomics: the bias gradient sums each column's rows in
//    order (one thread per column, the same order and bits as the CPU), and
//    the batch loss is a fixed-shape tree over one block.
//  - The build passes --fmad=false, and the Adam kernel spells each step with
//    the _rn intrinsics, so it matches AdamUpdateCpu bit for bit.
//  - Activations and softmax use the same formulas as the CPU; CUDA's erfcf,
//    expf and logf differ from glibc's by an ulp or two, so those agree to
//    ~1e-6 relative, not bitwise.
//
// Built only with CUDA (STRATA_HAVE_CUDA); include only from CUDA-built files.
#ifndef STRATA_TRAIN_COMPUTE_CUDA_CUDA_KERNELS_H_
#define STRATA_TRAIN_COMPUTE_CUDA_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "train/compute/compute.h"

namespace strata::train::kernels {

// Per-row softmax outcome, reduced on the device in a fixed order: scratch of
// `batch` of these for SoftmaxLoss.
struct RowResult {
  float loss;
  int32_t flag;
};
// What one SoftmaxLoss call leaves for the host to copy back.
struct BatchResult {
  double loss_sum;
  long long correct;
  long long first_bad_row;  // -1: every label in range
};

// y[i][j] = bias[j] for each of the `rows` rows of `cols` (before the GEMM
// adds x w^T with beta = 1).
absl::Status BroadcastRows(const float* bias, float* y, int64_t rows,
                           int64_t cols, cudaStream_t stream);

// db[j] = the column sums of dy in chunks of kReductionRows rows, as on the
// CPU (ColumnSumsInChunks); with `accumulate`, added to db[j].
absl::Status ColumnSums(const float* dy, float* db, int64_t rows, int64_t cols,
                        bool accumulate, cudaStream_t stream);

// a = act(z) and dz = da * act'(z) on n > 0 elements. InvalidArgument for an
// unknown activation.
absl::Status ActivationForward(Activation act, const float* z, float* a,
                               int64_t n, cudaStream_t stream);
absl::Status ActivationBackward(Activation act, const float* z, const float* da,
                                float* dz, int64_t n, cudaStream_t stream);

// Softmax cross-entropy of `batch` > 0 rows of `classes` logits: per-row
// results into `rows` (scratch of at least `batch`), then their sum, the
// correct count and the first row with a label outside [0, classes) into
// `*out`. Writes (softmax - onehot) / batch into dlogits unless it is null;
// a bad label's row is left untouched.
absl::Status SoftmaxLoss(const float* logits, const int32_t* labels,
                         float* dlogits, int64_t batch, int64_t classes,
                         RowResult* rows, BatchResult* out,
                         cudaStream_t stream);

// The Adam update of train/compute/compute.h on n > 0 elements, bit for bit as
// AdamUpdateCpu.
absl::Status Adam(const AdamParams& p, float* w, float* m, float* v,
                  const float* g, int64_t n, cudaStream_t stream);

}  // namespace strata::train::kernels

#endif  // STRATA_TRAIN_COMPUTE_CUDA_CUDA_KERNELS_H_
