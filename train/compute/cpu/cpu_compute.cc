// cpu_compute.cc: CpuCompute, the Compute over host memory — OpenBLAS sgemm
// for the linear layers, plain loops for the rest, the transformer's
// operations from cpu_transformer.h — and, in builds without CUDA, the
// MakeCudaCompute that says so.
//
// Determinism: OpenBLAS splits sgemm across its threads by rows and columns
// of the output, never along the inner dimension, so a fixed thread count
// gives fixed bits. Every other reduction here runs in a fixed order.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/cpu_linear16.h"
#include "train/compute/cpu/cpu_reduce.h"
#include "train/compute/cpu/cpu_transformer.h"
#include "train/compute/cpu/half_cast.h"

namespace strata::train {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// GELU through erfc rather than 1 + erf: identical in exact arithmetic, but
// for negative z the sum 1 + erf cancels to a few significant bits while
// erfc(-z / sqrt2) stays accurate. The CUDA kernel uses the same form.
float Gelu(float z) { return 0.5f * z * std::erfc(-z * kInvSqrt2); }

// d/dz [z Phi(z)] = Phi(z) + z phi(z).
float GeluGrad(float z) {
  const float cdf = 0.5f * std::erfc(-z * kInvSqrt2);
  const float pdf = kInvSqrt2Pi * std::exp(-0.5f * z * z);
  return cdf + z * pdf;
}

// GPT-2's tanh approximation: 0.5 z (1 + tanh(u)), u = sqrt(2/pi) (z +
// 0.044715 z^3). The CUDA kernel evaluates the same expressions.
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;
float GeluTanh(float z) {
  const float u = kSqrt2OverPi * (z + kGeluCubic * z * z * z);
  return 0.5f * z * (1.0f + std::tanh(u));
}
// d/dz: 0.5 (1 + tanh u) + 0.5 z (1 - tanh^2 u) du/dz.
float GeluTanhGrad(float z) {
  const float u = kSqrt2OverPi * (z + kGeluCubic * z * z * z);
  const float t = std::tanh(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * z * z);
  return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * du;
}

// The loss of one row of logits against `label` (already checked); writes
// softmax - onehot, divided by `batch`, to `d` unless it is null. Returns
// whether the first maximum is at `label`.
bool SoftmaxRow(const float* z, int32_t label, int64_t classes, int64_t batch,
                float* d, float* loss) {
  int64_t argmax = 0;
  for (int64_t j = 1; j < classes; ++j) {
    if (z[j] > z[argmax]) argmax = j;
  }
  const float max = z[argmax];
  float sum = 0.0f;
  for (int64_t j = 0; j < classes; ++j) {
    const float e = std::exp(z[j] - max);
    if (d != nullptr) d[j] = e;
    sum += e;
  }
  *loss = std::log(sum) - (z[label] - max);
  if (d != nullptr) {
    const float scale = static_cast<float>(batch);
    for (int64_t j = 0; j < classes; ++j) {
      const float onehot = j == label ? 1.0f : 0.0f;
      d[j] = (d[j] / sum - onehot) / scale;
    }
  }
  return argmax == label;
}

class CpuCompute final : public Compute {
 public:
  // The thread count is part of the name: OpenBLAS splits a GEMM's
  // reductions by thread, so results are bitwise reproducible only at the
  // same count.
  std::string name() const override {
    return absl::StrFormat("openblas:%d-threads", openblas_get_num_threads());
  }
  void* stream() const override { return nullptr; }

  absl::Status LinearForward(const float* x, const float* w, const float* bias,
                             float* y, int64_t batch, int64_t in,
                             int64_t out) override {
    STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
    // y = bias on every row, then y += x w^T.
    for (int64_t i = 0; i < batch; ++i) {
      std::copy(bias, bias + out, y + i * out);
    }
    if (batch == 0 || out == 0 || in == 0) return absl::OkStatus();
    // One sgemm per chunk of kReductionRows rows: OpenBLAS picks kernels by
    // shape (a narrow output takes another path at 256 rows than at 64), so
    // a row's result then never depends on how many rows came with it.
    for (int64_t r0 = 0; r0 < batch; r0 += kReductionRows) {
      const int64_t rows = std::min(kReductionRows, batch - r0);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
                  static_cast<int>(rows), static_cast<int>(out),
                  static_cast<int>(in), 1.0f, x + r0 * in, static_cast<int>(in),
                  w, static_cast<int>(in), 1.0f, y + r0 * out,
                  static_cast<int>(out));
    }
    return absl::OkStatus();
  }

  absl::Status LinearBackward(const float* x, const float* w, const float* dy,
                              float* dw, float* db, float* dx, int64_t batch,
                              int64_t in, int64_t out,
                              bool accumulate) override {
    STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
    ColumnSumsInChunks(dy, db, batch, out, accumulate, kReductionRows);
    // dw[out x in] = dy^T x (+ dw), in chunks of kReductionRows rows.
    for (int64_t r0 = 0; r0 < std::max<int64_t>(batch, 1);
         r0 += kReductionRows) {
      const int64_t rows = std::min(kReductionRows, batch - r0);
      BlasGemm(CblasTrans, CblasNoTrans, out, in, rows, dy + r0 * out, out,
               x + r0 * in, in, dw, in, accumulate || r0 > 0);
    }
    // dx[batch x in] = dy w, by row chunks as LinearForward.
    for (int64_t r0 = 0; dx != nullptr && r0 < batch; r0 += kReductionRows) {
      const int64_t rows = std::min(kReductionRows, batch - r0);
      BlasGemm(CblasNoTrans, CblasNoTrans, rows, in, out, dy + r0 * out, out, w,
               in, dx + r0 * in, in, /*accumulate=*/false);
    }
    return absl::OkStatus();
  }

  absl::Status ActivationForward(Activation act, const float* z, float* a,
                                 int64_t n) override {
    switch (act) {
      case Activation::kRelu:
        for (int64_t i = 0; i < n; ++i) a[i] = z[i] > 0.0f ? z[i] : 0.0f;
        return absl::OkStatus();
      case Activation::kGelu:
        for (int64_t i = 0; i < n; ++i) a[i] = Gelu(z[i]);
        return absl::OkStatus();
      case Activation::kGeluTanh:
        for (int64_t i = 0; i < n; ++i) a[i] = GeluTanh(z[i]);
        return absl::OkStatus();
    }
    return UnknownActivation(act);
  }

  absl::Status ActivationBackward(Activation act, const float* z,
                                  const float* da, float* dz,
                                  int64_t n) override {
    switch (act) {
      case Activation::kRelu:
        for (int64_t i = 0; i < n; ++i) dz[i] = z[i] > 0.0f ? da[i] : 0.0f;
        return absl::OkStatus();
      case Activation::kGelu:
        for (int64_t i = 0; i < n; ++i) dz[i] = da[i] * GeluGrad(z[i]);
        return absl::OkStatus();
      case Activation::kGeluTanh:
        for (int64_t i = 0; i < n; ++i) dz[i] = da[i] * GeluTanhGrad(z[i]);
        return absl::OkStatus();
    }
    return UnknownActivation(act);
  }

  absl::StatusOr<LossResult> SoftmaxCrossEntropy(const float* logits,
                                                 const int32_t* labels,
                                                 float* dlogits, int64_t batch,
                                                 int64_t classes) override {
    if (batch < 0 || classes <= 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "softmax cross-entropy needs batch >= 0 and classes > 0, got "
          "batch=%d classes=%d",
          batch, classes));
    }
    // Checked up front so a bad batch leaves dlogits untouched.
    for (int64_t i = 0; i < batch; ++i) {
      if (labels[i] < 0 || labels[i] >= classes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "label %d of row %d is outside [0, %d)", labels[i], i, classes));
      }
    }
    LossResult result;
    for (int64_t i = 0; i < batch; ++i) {
      float loss = 0.0f;
      float* d = dlogits == nullptr ? nullptr : dlogits + i * classes;
      if (SoftmaxRow(logits + i * classes, labels[i], classes, batch, d,
                     &loss)) {
        ++result.correct;
      }
      result.loss_sum += loss;
    }
    return result;
  }

  absl::Status Adam(const AdamParams& p, float* w, float* m, float* v,
                    const float* g, int64_t n) override {
    AdamUpdateCpu(p, w, m, v, g, n);
    return absl::OkStatus();
  }

  absl::Status Copy(const float* src, float* dst, int64_t n) override {
    if (n > 0) std::memcpy(dst, src, n * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Zero(float* x, int64_t n) override {
    if (n > 0) std::memset(x, 0, n * sizeof(float));
    return absl::OkStatus();
  }

  // ---- The transformer's operations: the CPU references (cpu_transformer.h)
  // on the shared host pool.
  absl::Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb,
                    float beta, float* c, int64_t ldc) override {
    return GemmCpu(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }
  absl::Status LayerNormForward(const float* x, const float* weight,
                                const float* bias, float* out, float* mean,
                                float* rstd, int64_t N, int64_t C) override {
    return LayerNormForwardCpu(x, weight, bias, out, mean, rstd, N, C);
  }
  absl::Status LayerNormBackward(const float* x, const float* weight,
                                 const float* mean, const float* rstd,
                                 const float* dout, float* dx, float* dweight,
                                 float* dbias, int64_t N, int64_t C) override {
    return LayerNormBackwardCpu(x, weight, mean, rstd, dout, dx, dweight, dbias,
                                N, C);
  }
  absl::Status AttentionForward(const float* qkv, float* out, float* lse,
                                int64_t B, int64_t T, int64_t C,
                                int64_t H) override {
    return AttentionForwardCpu(qkv, out, lse, B, T, C, H);
  }
  absl::Status AttentionBackward(const float* qkv, const float* out,
                                 const float* dout, const float* lse,
                                 float* dqkv, int64_t B, int64_t T, int64_t C,
                                 int64_t H) override {
    return AttentionBackwardCpu(qkv, out, dout, lse, dqkv, B, T, C, H);
  }
  absl::Status EmbeddingForward(const int32_t* tokens, const float* wte,
                                const float* wpe, float* out, int64_t B,
                                int64_t T, int64_t C, int64_t V) override {
    return EmbeddingForwardCpu(tokens, wte, wpe, out, B, T, C, V);
  }
  absl::Status EmbeddingForward16(Precision type, const int32_t* tokens,
                                  const uint16_t* wte, const uint16_t* wpe,
                                  float* out, int64_t B, int64_t T, int64_t C,
                                  int64_t V) override {
    return EmbeddingForward16Cpu(type, tokens, wte, wpe, out, B, T, C, V);
  }
  absl::Status EmbeddingBackward(const int32_t* tokens, const float* dout,
                                 float* dwte, float* dwpe, int64_t B, int64_t T,
                                 int64_t C, int64_t V) override {
    return EmbeddingBackwardCpu(tokens, dout, dwte, dwpe, B, T, C, V);
  }
  absl::StatusOr<double> CrossEntropy(const float* logits,
                                      const int32_t* targets, float* dlogits,
                                      int64_t rows, int64_t V,
                                      float grad_scale) override {
    return CrossEntropyCpu(logits, targets, dlogits, rows, V, grad_scale);
  }
  absl::Status Add(const float* a, const float* b, float* out,
                   int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckCount("Add", n));
    AddCpu(a, b, out, n);
    return absl::OkStatus();
  }
  absl::Status Scale(float* x, float s, int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckCount("Scale", n));
    ScaleCpu(x, s, n);
    return absl::OkStatus();
  }
  absl::StatusOr<double> SumOfSquares(const float* x, int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckCount("SumOfSquares", n));
    return SumOfSquaresCpu(x, n);
  }

  // ---- Mixed precision: the host casts (half_cast.h), the tiled 16-bit
  // linear layers (cpu_linear16.h) and the fused Adam pass (cpu_adam.h).
  absl::Status CastToHalf(Precision type, const RoundingMode& rounding,
                          const float* src, uint16_t* dst, int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, n, "CastToHalf"));
    nonfinite_.fetch_add(CastToHalfCpu(type, rounding, src, dst, n),
                         std::memory_order_relaxed);
    return absl::OkStatus();
  }
  absl::Status CastToFloat(Precision type, const uint16_t* src, float* dst,
                           int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, n, "CastToFloat"));
    CastToFloatCpu(type, src, dst, n);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> TakeNonFinite() override {
    return nonfinite_.exchange(0, std::memory_order_relaxed);
  }
  absl::Status LinearForward16(Precision type, const float* x,
                               const uint16_t* w, const uint16_t* bias,
                               float* y, int64_t batch, int64_t in,
                               int64_t out) override {
    return Linear16ForwardCpu(type, x, w, bias, y, batch, in, out);
  }
  absl::Status LinearBackward16(Precision type, const float* x,
                                const uint16_t* w, const float* dy, float* dw,
                                float* db, float* dx, int64_t batch, int64_t in,
                                int64_t out, bool accumulate) override {
    return Linear16BackwardCpu(type, x, w, dy, dw, db, dx, batch, in, out,
                               accumulate);
  }
  absl::Status AdamMixed(const AdamParams& p, const MixedAdamParams& mp,
                         float* w, float* m, float* v, const uint16_t* g16,
                         uint16_t* w16, int64_t n) override {
    STRATA_RETURN_IF_ERROR(CheckHalfArgs(mp.type, n, "AdamMixed"));
    nonfinite_.fetch_add(AdamMixedUpdateCpu(p, mp, w, m, v, g16, w16, n),
                         std::memory_order_relaxed);
    return absl::OkStatus();
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  // Non-finite results of CastToHalf and gradients of AdamMixed since the
  // last TakeNonFinite; atomic so an optimizer thread may add to it.
  std::atomic<int64_t> nonfinite_{0};

  static void BlasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m,
                       int64_t n, int64_t k, const float* a, int64_t lda,
                       const float* b, int64_t ldb, float* c, int64_t ldc,
                       bool accumulate) {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      if (!accumulate) std::fill(c, c + m * n, 0.0f);
      return;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), accumulate ? 1.0f : 0.0f, c,
                static_cast<int>(ldc));
  }

  static absl::Status CheckCount(const char* op, int64_t n) {
    if (n >= 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrFormat("%s of a negative count %d", op, n));
  }

  static absl::Status UnknownActivation(Activation act) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown activation %d", static_cast<int>(act)));
  }
};

}  // namespace

std::unique_ptr<Compute> MakeCpuCompute(int threads) {
  // OpenBLAS's thread count is process-wide: the last MakeCpuCompute with a
  // positive `threads` wins.
#if defined(STRATA_TSAN)
  // OpenBLAS's worker threads hand results back through spin-waits that
  // ThreadSanitizer cannot see (the library is not instrumented), so every
  // GEMM would look like a race: run it on the calling thread instead.
  threads = 1;
#endif
  if (threads > 0) openblas_set_num_threads(threads);
  return std::make_unique<CpuCompute>();
}

#if !defined(STRATA_HAVE_CUDA)
absl::StatusOr<std::unique_ptr<Compute>> MakeCudaCompute(int device) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "strata was built without CUDA (STRATA_WITH_CUDA=OFF or no toolkit), "
      "so CUDA device %d cannot run the training compute",
      device));
}
#endif

}  // namespace strata::train
