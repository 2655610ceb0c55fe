// cpu_linear16.cc: 16-bit linear layers on the host as tiled sgemm over
// 16-bit-valued tiles (see cpu_linear16.h).
#include "train/compute/cpu/cpu_linear16.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "strata/status.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/cpu_reduce.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"

namespace strata::train {
namespace {

// The tiles along a product's inner dimension are the row chunks of a
// gradient's sum (compute.h): micro-batches accumulate to one batch's bits.
static_assert(kLinear16Tile == kReductionRows);

// A row-major matrix operand of a product: fp32 values to be rounded to 16
// bits, or 16-bit values to be widened (exactly one of f32, h16 set).
struct Operand {
  const float* f32 = nullptr;
  const uint16_t* h16 = nullptr;
  int64_t ld = 0;  // row stride in elements
};

// Per-thread tile scratch: two fp32 tiles and one row of 16-bit values.
struct Scratch {
  std::vector<float> a, b;
  std::vector<uint16_t> row;
};

Scratch& ThreadScratch() {
  thread_local Scratch s{std::vector<float>(kLinear16Tile * kLinear16Tile),
                         std::vector<float>(kLinear16Tile * kLinear16Tile),
                         std::vector<uint16_t>(kLinear16Tile)};
  return s;
}

// tile[r][c] (ld cols) = the 16-bit value of op[r0 + r][c0 + c], for rows
// x cols <= kLinear16Tile^2, one row at a time through the vector casts.
void LoadTile(Precision type, const Operand& op, int64_t r0, int64_t rows,
              int64_t c0, int64_t cols, float* tile, uint16_t* row16) {
  static const VectorPath path = ChosenVectorPath();
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = tile + r * cols;
    const int64_t at = (r0 + r) * op.ld + c0;
    if (op.h16 != nullptr) {
      CastToFloatRange(path, type, op.h16 + at, dst, cols);
    } else {
      // Rounding of operands: nearest even, the count not wanted here.
      CastToHalfRange(path, type, RoundingMode{}, op.f32 + at, row16, cols);
      CastToFloatRange(path, type, row16, dst, cols);
    }
  }
}

// One tile of c: c[i0.., j0..] (mi x nj) (= or +=) the sum over the
// inner dimension's tiles, in order, of op(A) op(B) on 16-bit values.
void GemmTile(Precision type, bool trans_a, bool trans_b, int64_t i0,
              int64_t mi, int64_t j0, int64_t nj, int64_t k, const Operand& a,
              const Operand& b, float* c, int64_t ldc, bool accumulate) {
  Scratch& s = ThreadScratch();
  constexpr int64_t T = kLinear16Tile;
  for (int64_t p0 = 0; p0 < k; p0 += T) {
    const int64_t kp = std::min(T, k - p0);
    if (trans_a) {
      LoadTile(type, a, p0, kp, i0, mi, s.a.data(), s.row.data());
    } else {
      LoadTile(type, a, i0, mi, p0, kp, s.a.data(), s.row.data());
    }
    if (trans_b) {
      LoadTile(type, b, j0, nj, p0, kp, s.b.data(), s.row.data());
    } else {
      LoadTile(type, b, p0, kp, j0, nj, s.b.data(), s.row.data());
    }
    const float beta = (p0 == 0 && !accumulate) ? 0.0f : 1.0f;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(mi),
                static_cast<int>(nj), static_cast<int>(kp), 1.0f, s.a.data(),
                static_cast<int>(trans_a ? mi : kp), s.b.data(),
                static_cast<int>(trans_b ? kp : nj), beta, c + i0 * ldc + j0,
                static_cast<int>(ldc));
  }
}

// c[m x n] (ldc) (= or +=) op(A)[m x k] op(B)[k x n] in fp32, with A and B
// row-major as stored (A is [k x m] when trans_a, B [n x k] when trans_b).
// The tiles of c are spread over the shared HostPool; each is computed by
// one thread, the same way whichever thread runs it.
void TiledGemm(Precision type, bool trans_a, bool trans_b, int64_t m, int64_t n,
               int64_t k, const Operand& a, const Operand& b, float* c,
               int64_t ldc, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  constexpr int64_t T = kLinear16Tile;
  const int64_t tiles_n = (n + T - 1) / T;
  const int64_t tiles = (m + T - 1) / T * tiles_n;
#if defined(STRATA_TSAN)
  // OpenBLAS (not instrumented) hands its per-call buffers between threads
  // through spin locks ThreadSanitizer cannot see (cpu_compute.cc runs it
  // on one thread for the same reason), so the tiles stay on the caller.
  constexpr int64_t kMinTiles = int64_t{1} << 40;  // never split
#else
  constexpr int64_t kMinTiles = kLinear16MinTilesPerThread;
#endif
  HostPool::Shared().ParallelFor(
      tiles, kMinTiles, 1, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t i0 = t / tiles_n * T, j0 = t % tiles_n * T;
          GemmTile(type, trans_a, trans_b, i0, std::min(T, m - i0), j0,
                   std::min(T, n - j0), k, a, b, c, ldc, accumulate);
        }
      });
}

}  // namespace

absl::Status Linear16ForwardCpu(Precision type, const float* x,
                                const uint16_t* w, const uint16_t* bias,
                                float* y, int64_t batch, int64_t in,
                                int64_t out) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, 0, "LinearForward16"));
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  static const VectorPath path = ChosenVectorPath();
  if (bias != nullptr) {
    for (int64_t i = 0; i < batch; ++i) {
      CastToFloatRange(path, type, bias, y + i * out, out);
    }
  }
  // y[batch x out] (+)= r(x)[batch x in] w[out x in]^T.
  TiledGemm(type, false, true, batch, out, in, Operand{x, nullptr, in},
            Operand{nullptr, w, in}, y, out, /*accumulate=*/bias != nullptr);
  return absl::OkStatus();
}

absl::Status Linear16BackwardCpu(Precision type, const float* x,
                                 const uint16_t* w, const float* dy, float* dw,
                                 float* db, float* dx, int64_t batch,
                                 int64_t in, int64_t out, bool accumulate) {
  STRATA_RETURN_IF_ERROR(CheckHalfArgs(type, 0, "LinearBackward16"));
  STRATA_RETURN_IF_ERROR(CheckLinearDims(batch, in, out));
  if (db != nullptr) {
    ColumnSumsInChunks(dy, db, batch, out, accumulate, kReductionRows);
  }
  // dw[out x in] (+)= r(dy)^T r(x): dy is stored [batch x out].
  TiledGemm(type, true, false, out, in, batch, Operand{dy, nullptr, out},
            Operand{x, nullptr, in}, dw, in, accumulate);
  if (dx != nullptr) {
    // dx[batch x in] = r(dy) w.
    TiledGemm(type, false, false, batch, in, out, Operand{dy, nullptr, out},
              Operand{nullptr, w, in}, dx, in, /*accumulate=*/false);
  }
  return absl::OkStatus();
}

}  // namespace strata::train
