// cpu_transformer.cc: the CPU references of cpu_transformer.h except
// attention (cpu_attention.cc): Gemm, LayerNorm, the embedding,
// cross-entropy and the elementwise operations.
//
// The build compiles this file with -O3 -ffp-contract=off -fno-math-errno:
// the row loops and cpu_reduce.h's lane loops vectorise, no multiply-add is
// fused (the CUDA kernels build with --fmad=false), and sqrtf is one
// instruction. Every float operation is the one the code spells, in its
// order.
#include "train/compute/cpu/cpu_transformer.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/cpu_reduce.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/cpu/vector_path.h"

namespace strata::train {
namespace {

// Columns per ParallelFor cut for the work split by column blocks: 16 floats,
// one cache line, so no two threads write the same line of a row.
constexpr int64_t kColumnAlign = 16;

absl::Status NeedAtLeast(const char* op, const char* name, int64_t value,
                         int64_t min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s needs %s >= %d, got %d", op, name, min, value));
}

absl::Status CheckEmbeddingDims(const char* op, int64_t B, int64_t T,
                                int64_t C) {
  STRATA_RETURN_IF_ERROR(NeedAtLeast(op, "B", B, 0));
  STRATA_RETURN_IF_ERROR(NeedAtLeast(op, "T", T, 0));
  return NeedAtLeast(op, "C", C, 0);
}

// InvalidArgument naming the first of tokens[0 .. n) outside [0, V).
absl::Status CheckTokens(const char* op, const char* what,
                         const int32_t* tokens, int64_t n, int64_t V) {
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s %d at position %d is outside [0, %d)", op,
                          what, tokens[i], i, V));
    }
  }
  return absl::OkStatus();
}

// One row of LayerNormForward (see the header for the two passes).
void LayerNormRow(const float* x, const float* weight, const float* bias,
                  float* out, float* mean, float* rstd, int64_t C) {
  const float c = static_cast<float>(C);
  const float m = LaneSum(x, C) / c;
  const float var = LaneSumSquaredDeviation(x, m, C) / c;
  const float s = 1.0f / std::sqrt(var + kLayerNormEps);
  for (int64_t i = 0; i < C; ++i) out[i] = (x[i] - m) * s * weight[i] + bias[i];
  *mean = m;
  *rstd = s;
}

// dx += of one row of LayerNormBackward; `scratch` holds 2 C floats.
void LayerNormBackwardRow(const float* x, const float* weight, float mean,
                          float rstd, const float* dout, float* dx, int64_t C,
                          float* scratch) {
  float* norm = scratch;
  float* dnorm = scratch + C;
  for (int64_t i = 0; i < C; ++i) {
    norm[i] = (x[i] - mean) * rstd;
    dnorm[i] = dout[i] * weight[i];
  }
  const float c = static_cast<float>(C);
  const float dnorm_mean = LaneSum(dnorm, C) / c;
  const float dnorm_norm_mean = LaneDot(dnorm, norm, C) / c;
  for (int64_t i = 0; i < C; ++i) {
    dx[i] += (dnorm[i] - dnorm_mean - norm[i] * dnorm_norm_mean) * rstd;
  }
}

// dweight and dbias += of LayerNormBackward for columns [c0, c1), the rows
// in order; norm is recomputed with the row pass's expression.
void LayerNormParamColumns(const float* x, const float* mean, const float* rstd,
                           const float* dout, float* dweight, float* dbias,
                           int64_t N, int64_t C, int64_t c0, int64_t c1) {
  for (int64_t r = 0; r < N; ++r) {
    const float* xr = x + r * C;
    const float* dr = dout + r * C;
    for (int64_t i = c0; i < c1; ++i) {
      dweight[i] += dr[i] * ((xr[i] - mean[r]) * rstd[r]);
      dbias[i] += dr[i];
    }
  }
}

// The loss of one row of logits against `target` (checked), summing the
// exponentials in lane order; writes (softmax - onehot) * grad_scale to d
// unless it is null (d may equal z).
float CrossEntropyRow(const float* z, int32_t target, int64_t V,
                      float grad_scale, float* d) {
  const float max = LaneMax(z, V);
  const float z_target = z[target];
  float sum = 0.0f;
  if (d == nullptr) {
    float acc[kReduceLanes] = {};
    for (int64_t j = 0; j < V; ++j) {
      acc[j % kReduceLanes] += std::exp(z[j] - max);
    }
    sum = FoldSum(acc);
  } else {
    for (int64_t j = 0; j < V; ++j) d[j] = std::exp(z[j] - max);
    sum = LaneSum(d, V);
    for (int64_t j = 0; j < V; ++j) {
      const float onehot = j == target ? 1.0f : 0.0f;
      d[j] = (d[j] / sum - onehot) * grad_scale;
    }
  }
  return std::log(sum) - (z_target - max);
}

// sum of x[i]^2 over one block, in double, in lane order.
double BlockSumOfSquares(const float* x, int64_t n) {
  double acc[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int l = 0; l < kReduceLanes; ++l) {
      const double v = x[i + l];
      acc[l] += v * v;
    }
  }
  for (int l = 0; i + l < n; ++l) {
    const double v = x[i + l];
    acc[l] += v * v;
  }
  return FoldSum(acc);
}

}  // namespace

absl::Status GemmCpu(bool trans_a, bool trans_b, int64_t m, int64_t n,
                     int64_t k, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float beta, float* c, int64_t ldc) {
  STRATA_RETURN_IF_ERROR(
      CheckGemmArgs(trans_a, trans_b, m, n, k, lda, ldb, beta, ldc));
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {
    // op(a) op(b) is all zeros; BLAS would return without touching c.
    if (beta == 0.0f) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return absl::OkStatus();
  }
  // BLAS with beta 0 stores the product without reading c, so NaN garbage
  // there does not survive (0 * NaN would).
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
  return absl::OkStatus();
}

absl::Status LayerNormForwardCpu(const float* x, const float* weight,
                                 const float* bias, float* out, float* mean,
                                 float* rstd, int64_t N, int64_t C,
                                 HostPool& pool) {
  STRATA_RETURN_IF_ERROR(NeedAtLeast("LayerNormForward", "N", N, 0));
  STRATA_RETURN_IF_ERROR(NeedAtLeast("LayerNormForward", "C", C, 1));
  pool.ParallelFor(N, MinItemsPerThread(5 * C), 1,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       LayerNormRow(x + r * C, weight, bias, out + r * C,
                                    mean + r, rstd + r, C);
                     }
                   });
  return absl::OkStatus();
}

absl::Status LayerNormBackwardCpu(const float* x, const float* weight,
                                  const float* mean, const float* rstd,
                                  const float* dout, float* dx, float* dweight,
                                  float* dbias, int64_t N, int64_t C,
                                  HostPool& pool) {
  STRATA_RETURN_IF_ERROR(NeedAtLeast("LayerNormBackward", "N", N, 0));
  STRATA_RETURN_IF_ERROR(NeedAtLeast("LayerNormBackward", "C", C, 1));
  pool.ParallelFor(
      N, MinItemsPerThread(9 * C), 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scratch(2 * C);
        for (int64_t r = begin; r < end; ++r) {
          LayerNormBackwardRow(x + r * C, weight, mean[r], rstd[r],
                               dout + r * C, dx + r * C, C, scratch.data());
        }
      });
  pool.ParallelFor(C, std::max(kColumnAlign, MinItemsPerThread(5 * N)),
                   kColumnAlign, [&](int64_t begin, int64_t end) {
                     LayerNormParamColumns(x, mean, rstd, dout, dweight, dbias,
                                           N, C, begin, end);
                   });
  return absl::OkStatus();
}

absl::Status EmbeddingForwardCpu(const int32_t* tokens, const float* wte,
                                 const float* wpe, float* out, int64_t B,
                                 int64_t T, int64_t C, int64_t V,
                                 HostPool& pool) {
  STRATA_RETURN_IF_ERROR(CheckEmbeddingDims("EmbeddingForward", B, T, C));
  STRATA_RETURN_IF_ERROR(
      CheckTokens("EmbeddingForward", "token", tokens, B * T, V));
  pool.ParallelFor(B * T, MinItemsPerThread(C), 1,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t r = begin; r < end; ++r) {
                       const float* e = wte + tokens[r] * C;
                       const float* p = wpe + (r % T) * C;
                       float* o = out + r * C;
                       for (int64_t i = 0; i < C; ++i) o[i] = e[i] + p[i];
                     }
                   });
  return absl::OkStatus();
}

absl::Status EmbeddingForward16Cpu(Precision type, const int32_t* tokens,
                                   const uint16_t* wte, const uint16_t* wpe,
                                   float* out, int64_t B, int64_t T, int64_t C,
                                   int64_t V, HostPool& pool) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, 0, "EmbeddingForward16"));
  STRATA_RETURN_IF_ERROR(CheckEmbeddingDims("EmbeddingForward16", B, T, C));
  STRATA_RETURN_IF_ERROR(
      CheckTokens("EmbeddingForward16", "token", tokens, B * T, V));
  static const VectorPath path = ChosenVectorPath();
  pool.ParallelFor(
      B * T, MinItemsPerThread(2 * C), 1, [&](int64_t begin, int64_t end) {
        std::vector<float> p(C);
        for (int64_t r = begin; r < end; ++r) {
          float* o = out + r * C;
          CastToFloatRange(path, type, wte + tokens[r] * C, o, C);
          CastToFloatRange(path, type, wpe + (r % T) * C, p.data(), C);
          for (int64_t i = 0; i < C; ++i) o[i] += p[i];
        }
      });
  return absl::OkStatus();
}

absl::Status EmbeddingBackwardCpu(const int32_t* tokens, const float* dout,
                                  float* dwte, float* dwpe, int64_t B,
                                  int64_t T, int64_t C, int64_t V,
                                  HostPool& pool) {
  STRATA_RETURN_IF_ERROR(CheckEmbeddingDims("EmbeddingBackward", B, T, C));
  STRATA_RETURN_IF_ERROR(
      CheckTokens("EmbeddingBackward", "token", tokens, B * T, V));
  const int64_t N = B * T;
  // Row n = b T + t: in increasing n, each dwte row gathers its tokens'
  // rows in order n and each dwpe row its rows in order b.
  pool.ParallelFor(C, std::max(kColumnAlign, MinItemsPerThread(2 * N)),
                   kColumnAlign, [&](int64_t begin, int64_t end) {
                     for (int64_t r = 0; r < N; ++r) {
                       const float* d = dout + r * C;
                       float* e = dwte + tokens[r] * C;
                       float* p = dwpe + (r % T) * C;
                       for (int64_t i = begin; i < end; ++i) e[i] += d[i];
                       for (int64_t i = begin; i < end; ++i) p[i] += d[i];
                     }
                   });
  return absl::OkStatus();
}

absl::StatusOr<double> CrossEntropyCpu(const float* logits,
                                       const int32_t* targets, float* dlogits,
                                       int64_t rows, int64_t V,
                                       float grad_scale, HostPool& pool) {
  STRATA_RETURN_IF_ERROR(NeedAtLeast("CrossEntropy", "rows", rows, 0));
  STRATA_RETURN_IF_ERROR(NeedAtLeast("CrossEntropy", "V", V, 1));
  STRATA_RETURN_IF_ERROR(
      CheckTokens("CrossEntropy", "target", targets, rows, V));
  std::vector<float> losses(rows);
  pool.ParallelFor(
      rows, MinItemsPerThread(20 * V), 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* d = dlogits == nullptr ? nullptr : dlogits + r * V;
          losses[r] =
              CrossEntropyRow(logits + r * V, targets[r], V, grad_scale, d);
        }
      });
  double total = 0.0;
  for (float loss : losses) total += loss;
  return total;
}

void AddCpu(const float* a, const float* b, float* out, int64_t n,
            HostPool& pool) {
  pool.ParallelFor(n, MinItemsPerThread(1), kColumnAlign,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
                   });
}

void ScaleCpuWith(float* x, float s, int64_t n, HostPool& pool) {
  pool.ParallelFor(n, MinItemsPerThread(1), kColumnAlign,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) x[i] *= s;
                   });
}

void ScaleCpu(float* x, float s, int64_t n) {
  ScaleCpuWith(x, s, n, HostPool::Shared());
}

double SumOfSquaresCpu(const float* x, int64_t n, HostPool& pool) {
  if (n <= 0) return 0.0;
  const int64_t blocks = (n + kSumOfSquaresBlock - 1) / kSumOfSquaresBlock;
  std::vector<double> partial(blocks);
  pool.ParallelFor(blocks, MinItemsPerThread(2 * kSumOfSquaresBlock), 1,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t i = begin; i < end; ++i) {
                       const int64_t start = i * kSumOfSquaresBlock;
                       partial[i] = BlockSumOfSquares(
                           x + start, std::min(kSumOfSquaresBlock, n - start));
                     }
                   });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace strata::train
