// compute.h: the math a training step needs, on the device tier's memory.
//
// Two implementations: CpuCompute (OpenBLAS; for the simulated device, whose
// "device memory" is host memory) and CudaCompute (cuBLAS plus small kernels;
// pointers are CUDA device memory from device-tier leases). Every matrix is
// row-major and dense, float32 except where an operation says 16-bit (the
// mixed-precision ones: uint16_t bf16/fp16 bits, precision.h). Work is
// issued on stream() and is ordered on it;
// results a caller reads on the host (loss, correct count) are synchronised.
//
// Determinism: each operation gives the same bits for the same inputs on the
// same Compute, so a run whose tensors move between tiers produces exactly the
// losses of a run where nothing moves (no atomics, fixed reduction orders).
// Across machines it need not: OpenBLAS's results depend on its thread count
// and CPU kernels, cuBLAS's on the GPU.
#ifndef STRATA_TRAIN_COMPUTE_COMPUTE_H_
#define STRATA_TRAIN_COMPUTE_COMPUTE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/compute/precision.h"

namespace strata::train {

enum class Activation : uint8_t {
  kRelu,  // max(z, 0); derivative 1 for z > 0, else 0
  kGelu,  // z * Phi(z) with the exact erf form (Hendrycks & Gimpel, 2016)
  // 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))): the tanh approximation
  // GPT-2 uses (Hendrycks & Gimpel, 2016; Radford et al., 2019).
  kGeluTanh,
};

// LayerNorm's epsilon (GPT-2's, PyTorch's default).
inline constexpr float kLayerNormEps = 1e-5f;

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

// The fused mixed-precision AdamW pass (issue 18's "fused passes";
// ZeRO-Offload's host step for 16-bit training, Ren et al. 2021): per
// element, in one pass over memory,
//   g = widen(g16) * grad_scale    (the loss scale's unscale times the
//                                   clipping coefficient, folded: exact
//                                   when the loss scale is a power of two)
//   w = w * decay                  (AdamW's decoupled decay, Loshchilov &
//                                   Hutter 2019; 1 for none)
//   m, v, w updated with g as AdamParams says
//   w16 = w rounded to `type` as `rounding` says
// so its fp32 results are bit for bit those of ScaleCpu(w, decay) and
// AdamUpdateCpu on the widened, scaled gradient (the fp32 flow's order).
struct MixedAdamParams {
  Precision type = Precision::kBf16;  // of g16 and w16: kBf16 or kFp16
  float grad_scale = 1.0f;            // Default: 1 (no unscale, no clip)
  float decay = 1.0f;                 // 1 - lr * weight_decay. Default: 1
  RoundingMode rounding;              // of w16. Default: nearest even
};

// The fused pass above on n host elements: w, m, v fp32 (updated), g16 the
// 16-bit gradient, w16 the 16-bit parameter copy (written). Runs the
// widest vector path and splits over the shared HostPool as
// AdamUpdateCpu does; neither changes a bit. Returns how many scaled
// gradients were infinity or NaN: the caller should have skipped the step
// on the cast's count (half_cast.h) before; the update does not skip them.
// mp.type must be kBf16 or kFp16 (Compute::AdamMixed checks).
int64_t AdamMixedUpdateCpu(const AdamParams& p, const MixedAdamParams& mp,
                           float* w, float* m, float* v, const uint16_t* g16,
                           uint16_t* w16, int64_t n);

// x[i] *= s for n elements on the host (the host optimizer's gradient
// clipping and AdamW decay; what CpuCompute::Scale runs). Exact IEEE
// multiplies, so the CUDA Scale gives the same bits.
void ScaleCpu(float* x, float s, int64_t n);

// On the CPU, a linear layer's products run in chunks of this many rows from
// row 0 — the sums behind its weight and bias gradients (dw = dy^T x, db =
// the column sums of dy) each chunk's sum added to the total in order, and
// y = x w^T and dx = dy w one GEMM per chunk (OpenBLAS picks kernels by
// shape: a narrow layer takes another path at 256 rows than at 64). So
// micro-batches whose rows are a multiple of it, accumulated, compute what
// one batch computes: --accumulate=4 at --batch=64 trains to the bits of
// --batch=256. 64 rows keep each chunk a full BLAS kernel's depth; it is
// also the 16-bit tiles' (cpu_linear16.h). The column sums run so on the
// GPU too (the same bits as the CPU's); cuBLAS's GEMMs are whole (it too
// picks kernels by shape, and chunking would cost launches).
inline constexpr int64_t kReductionRows = 64;

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
  //   dw[out x in] = dy^T * x,  db[out] = column sums of dy (each summed in
  //   chunks of kReductionRows rows in order, the chunks added in order),
  //   dx[batch x in] = dy * w   (skipped when dx is null: the first layer).
  // With `accumulate`, dw and db gain these instead (dw += dy^T * x,
  // db += the column sums): gradient accumulation over micro-batches.
  virtual absl::Status LinearBackward(const float* x, const float* w,
                                      const float* dy, float* dw, float* db,
                                      float* dx, int64_t batch, int64_t in,
                                      int64_t out, bool accumulate) = 0;

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

  // ---- The transformer's operations (the GPT, gpt.h). Shapes are row-major;
  // N is a number of token rows (batch x context), C the embedding width.
  // Parameter gradients named "+=" accumulate into what the caller holds
  // (zero it first), so a gradient can gather several contributions (the
  // tied embedding; micro-batches).

  // c[m x n] = op(a) op(b) + beta * c, where op(x) is x or x^T as trans_*
  // says; a is [m x k] (op = x) or [k x m] (op = x^T) with row stride lda,
  // b likewise [k x n] or [n x k] with stride ldb, c has stride ldc. beta is
  // 0 (overwrite; c may hold garbage, even NaN) or 1 (accumulate).
  // InvalidArgument for a dimension outside [0, INT_MAX] or another beta.
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                            int64_t k, const float* a, int64_t lda,
                            const float* b, int64_t ldb, float beta, float* c,
                            int64_t ldc) = 0;

  // LayerNorm (Ba et al., 2016) over each row of x[N x C]:
  //   out = (x - mean) * rstd * weight + bias,  rstd = 1/sqrt(var + eps),
  // var the biased variance, eps kLayerNormEps. Saves mean[N] and rstd[N]
  // for the backward pass.
  virtual absl::Status LayerNormForward(const float* x, const float* weight,
                                        const float* bias, float* out,
                                        float* mean, float* rstd, int64_t N,
                                        int64_t C) = 0;

  // Gradients of LayerNormForward given dout[N x C]: dx[N x C] +=, dweight[C]
  // and dbias[C] += (column sums over the rows in order).
  virtual absl::Status LayerNormBackward(const float* x, const float* weight,
                                         const float* mean, const float* rstd,
                                         const float* dout, float* dx,
                                         float* dweight, float* dbias,
                                         int64_t N, int64_t C) = 0;

  // Causal multi-head self-attention (Vaswani et al., 2017) without the
  // T x T matrix: each query row's scores are recomputed where needed, as in
  // FlashAttention (Dao et al., 2022), so memory is O(B T C), not
  // O(B H T^2). qkv is [B x T x 3C]: per token q | k | v, each C wide and
  // split into H heads of C/H contiguous floats. For each (b, h, t):
  //   s_j = q_t . k_j / sqrt(C/H) for j <= t,  p = softmax(s),
  //   out[b, t, h] = sum_j p_j v_j,  lse[b, h, t] = log sum_j exp(s_j).
  // out is [B x T x C], lse [B x H x T] (saved for backward).
  // InvalidArgument unless H >= 1 divides C.
  virtual absl::Status AttentionForward(const float* qkv, float* out,
                                        float* lse, int64_t B, int64_t T,
                                        int64_t C, int64_t H) = 0;

  // Gradient of AttentionForward given dout[B x T x C] and the forward's out
  // and lse: writes dqkv[B x T x 3C] (overwritten), with
  //   D_t = dout_t . out_t,  dp_j = dout_t . v_j,  ds_j = p_j (dp_j - D_t),
  //   dq_t = sum_j ds_j k_j / sqrt(C/H),  dk_j, dv_j summed over t >= j
  // in order of t.
  virtual absl::Status AttentionBackward(const float* qkv, const float* out,
                                         const float* dout, const float* lse,
                                         float* dqkv, int64_t B, int64_t T,
                                         int64_t C, int64_t H) = 0;

  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] for tokens [B x T]
  // (int32), wte [V x C], wpe [T' x C] with T' >= T. The caller guarantees
  // every token is in [0, V) (the CPU version checks: InvalidArgument).
  virtual absl::Status EmbeddingForward(const int32_t* tokens, const float* wte,
                                        const float* wpe, float* out, int64_t B,
                                        int64_t T, int64_t C, int64_t V) = 0;

  // Gradients of EmbeddingForward given dout[B x T x C]: dwte[tokens[n]] +=
  // dout[n] for n = 0 .. B T - 1 in that order, dwpe[t] += dout[b, t] for
  // b in order (deterministic: no atomics).
  virtual absl::Status EmbeddingBackward(const int32_t* tokens,
                                         const float* dout, float* dwte,
                                         float* dwpe, int64_t B, int64_t T,
                                         int64_t C, int64_t V) = 0;

  // Softmax cross-entropy of each row of logits[rows x V] against
  // targets[rows] (int32 in [0, V); InvalidArgument otherwise, nothing
  // written): returns the sum over the rows of log sum_j exp(z_j) - z_target
  // (each row in float, summed in double in row order). Unless dlogits is
  // null, writes dlogits = (softmax(z) - onehot(target)) * grad_scale
  // (dlogits may equal logits: in place). Slices of a batch call it in turn
  // with grad_scale = 1 / (tokens in the whole batch).
  virtual absl::StatusOr<double> CrossEntropy(const float* logits,
                                              const int32_t* targets,
                                              float* dlogits, int64_t rows,
                                              int64_t V, float grad_scale) = 0;

  // out[i] = a[i] + b[i] for n elements (the residual add; out may equal a
  // or b, so Add(d, s, d, n) accumulates s into d).
  virtual absl::Status Add(const float* a, const float* b, float* out,
                           int64_t n) = 0;

  // x[i] *= s for n elements (gradient clipping; AdamW's decay).
  virtual absl::Status Scale(float* x, float s, int64_t n) = 0;

  // dst[i] = src[i] for n elements (the ranges must not overlap).
  virtual absl::Status Copy(const float* src, float* dst, int64_t n) = 0;

  // x[i] = 0 for n elements (before a "+=" gradient).
  virtual absl::Status Zero(float* x, int64_t n) = 0;

  // sum of x[i]^2 over n elements, accumulated in double in a fixed order
  // (the same bits every call); synchronises.
  virtual absl::StatusOr<double> SumOfSquares(const float* x, int64_t n) = 0;

  // ---- Mixed precision (precision.h, half.h). A 16-bit array holds bf16
  // or fp16 bits as `type` says; every one of these returns
  // InvalidArgument for type kFp32 (use the float operations) and for a
  // negative count or a dimension outside [0, INT_MAX].

  // dst[i] = src[i] rounded to `type` as `rounding` says (bitwise as
  // half.h, on every Compute), for n elements. Adds the results that are
  // infinity or NaN (a non-finite input, or an fp16 overflow: the loss
  // scale's check, Micikevicius et al. 2018) to the non-finite count, in
  // the same pass; on the device without synchronising.
  virtual absl::Status CastToHalf(Precision type, const RoundingMode& rounding,
                                  const float* src, uint16_t* dst,
                                  int64_t n) = 0;

  // dst[i] = src[i] widened exactly (fp16 NaNs quieted) for n elements.
  virtual absl::Status CastToFloat(Precision type, const uint16_t* src,
                                   float* dst, int64_t n) = 0;

  // The non-finite count added since the last call (CastToHalf, AdamMixed),
  // which resets it to 0; synchronises. Read once per step to decide
  // whether to skip it (DynamicLossScale::Update, loss_scale.h).
  virtual absl::StatusOr<int64_t> TakeNonFinite() = 0;

  // LinearForward with 16-bit w[out x in] and bias[out]:
  //   y[batch x out] = r(x) w^T + bias,
  // r(x) = x rounded to nearest even in `type`; the products of the 16-bit
  // values are summed in fp32 (cuBLAS GemmEx with CUBLAS_COMPUTE_32F; on
  // the CPU, slices of the operands widened into bounded scratch for
  // sgemm, never a whole-tensor fp32 copy). x and y are fp32. bias may be
  // null: no bias (the GPT's tied classifier).
  virtual absl::Status LinearForward16(Precision type, const float* x,
                                       const uint16_t* w, const uint16_t* bias,
                                       float* y, int64_t batch, int64_t in,
                                       int64_t out) = 0;

  // Gradients of LinearForward16 given fp32 dy[batch x out], in fp32:
  //   dw[out x in] = r(dy)^T r(x),  db[out] = column sums of dy (chunked
  //   as LinearBackward's),  dx[batch x in] = r(dy) w  (skipped when dx is
  //   null).
  // accumulate: dw += and db += (micro-batches of one step; the caller
  // zeroes them first); else they are overwritten (may hold garbage).
  // db may be null: no bias.
  virtual absl::Status LinearBackward16(Precision type, const float* x,
                                        const uint16_t* w, const float* dy,
                                        float* dw, float* db, float* dx,
                                        int64_t batch, int64_t in, int64_t out,
                                        bool accumulate) = 0;

  // EmbeddingForward with 16-bit tables: out[b, t, :] = widen(wte[token]) +
  // widen(wpe[t]) in fp32, the bits EmbeddingForward gives on the widened
  // tables.
  virtual absl::Status EmbeddingForward16(Precision type, const int32_t* tokens,
                                          const uint16_t* wte,
                                          const uint16_t* wpe, float* out,
                                          int64_t B, int64_t T, int64_t C,
                                          int64_t V) = 0;

  // AdamMixedUpdateCpu's fused pass on this compute's memory (the device
  // optimizer's, bit for bit the host's); the non-finite gradients it sees
  // join the non-finite count.
  virtual absl::Status AdamMixed(const AdamParams& p, const MixedAdamParams& mp,
                                 float* w, float* m, float* v,
                                 const uint16_t* g16, uint16_t* w16,
                                 int64_t n) = 0;

  // Waits until all issued work has finished; reports an asynchronous error.
  virtual absl::Status Synchronize() = 0;
};

// InvalidArgument unless batch, in and out are in [0, INT_MAX]: both BLAS
// libraries take int dimensions, so anything wider is a caller bug.
absl::Status CheckLinearDims(int64_t batch, int64_t in, int64_t out);

// Gemm's errors, for every implementation: InvalidArgument for a dimension
// or stride outside [0, INT_MAX] (both BLAS libraries take int), a beta other
// than 0 or 1, or a row stride shorter than its row (an empty product needs
// none).
absl::Status CheckGemmArgs(bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, int64_t lda, int64_t ldb, float beta,
                           int64_t ldc);

// The mixed-precision operations' common errors, for every implementation:
// InvalidArgument unless `type` is kBf16 or kFp16 and n >= 0.
absl::Status CheckHalfArgs(Precision type, int64_t n, const char* op);

// OpenBLAS on host memory. `threads` bounds OpenBLAS's threads (0: its
// default).
std::unique_ptr<Compute> MakeCpuCompute(int threads = 0);

// cuBLAS and kernels on CUDA device `device` with its own stream.
// FailedPrecondition when strata was built without CUDA or that GPU does not
// answer (as OpenDeviceBackend: fix the machine or choose the CPU); Internal
// with the CUDA error's name otherwise.
absl::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device = 0);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_COMPUTE_H_
