// cuda_attention_kernels.cu: causal self-attention without the T x T matrix
// (compute.h's AttentionForward/Backward; FlashAttention's recomputation,
// Dao et al., 2022), one warp per row, and the host functions that launch
// them (declared in cuda_transformer_kernels.h). Built with --fmad=false.
//
// Forward: a warp per query row (b, h, t) runs an online softmax over the
// keys j = 0 .. t in order; lanes split the head's dimensions, WarpDot's
// butterfly gives every lane the same score. Backward: D_t first, then a warp
// per query row for dq (keys j <= t in order) and a warp per key row for dk
// and dv (queries t >= j in increasing t), each recomputing p from the saved
// lse. Every gradient element is written by one lane, which adds its terms
// in a fixed order: no atomics, the same bits every run. A head wider than
// kHeadChunk dimensions takes several passes over the row, each recomputing
// the same scores bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/compute/cuda/cuda_reduce.h"
#include "train/compute/cuda/cuda_transformer_kernels.h"

namespace strata::train::kernels {
namespace {

// Warps per block, and the head dimensions one pass over a row accumulates
// in registers (kDimsPerLane per lane).
constexpr int kAttnWarps = 4;
constexpr int kAttnThreads = kAttnWarps * kWarpSize;
constexpr int kDimsPerLane = 4;
constexpr int64_t kHeadChunk = kDimsPerLane * kWarpSize;

int WarpBlocks(int64_t rows) {
  return static_cast<int>(
      std::clamp<int64_t>((rows + kAttnWarps - 1) / kAttnWarps, 1, kMaxBlocks));
}

struct Heads {
  int64_t T, C, H, hs;  // hs = C / H, a head's width
  float scale;          // 1 / sqrt(hs)
};

Heads MakeHeads(int64_t T, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  return Heads{T, C, H, hs, 1.0f / std::sqrt(static_cast<float>(hs))};
}

// Attention row r = (b H + h) T + t (lse's layout): batch b, head h,
// position t.
struct HeadRow {
  int64_t b, h, t;
};
__device__ HeadRow SplitRow(const Heads& s, int64_t r) {
  const int64_t bh = r / s.T;
  return HeadRow{bh / s.H, bh % s.H, r % s.T};
}

// Head h's q of token (b, t) in qkv; its k and v are C and 2 C further on.
__device__ const float* QueryOf(const float* qkv, const Heads& s, int64_t b,
                                int64_t t, int64_t h) {
  return qkv + (b * s.T + t) * 3 * s.C + h * s.hs;
}
// Head h's slice of token (b, t) in a [B x T x C] tensor (out, dout).
__device__ int64_t SliceOffset(const Heads& s, int64_t b, int64_t t,
                               int64_t h) {
  return (b * s.T + t) * s.C + h * s.hs;
}

// One warp per query row: an online softmax (Milakov & Gimelshein, 2018) over
// the keys j = 0 .. t in order, rescaling the running sum and the weighted
// values whenever the maximum grows.
__global__ void AttentionForwardKernel(const float* qkv, float* out, float* lse,
                                       int64_t rows, Heads s) {
  const int lane = Lane();
  for (int64_t row = WarpIndex(); row < rows; row += WarpStride()) {
    const HeadRow r = SplitRow(s, row);
    const float* q = QueryOf(qkv, s, r.b, r.t, r.h);
    float* o = out + SliceOffset(s, r.b, r.t, r.h);
    for (int64_t c0 = 0; c0 < s.hs; c0 += kHeadChunk) {
      float acc[kDimsPerLane] = {};
      float max = -INFINITY;  // the first key's rescale is exp(-inf) = 0
      float sum = 0.0f;
      for (int64_t j = 0; j <= r.t; ++j) {
        const float* k = QueryOf(qkv, s, r.b, j, r.h) + s.C;
        const float* v = k + s.C;
        const float score = WarpDot(q, k, s.hs) * s.scale;
        const float new_max = fmaxf(max, score);
        const float rescale = expf(max - new_max);
        const float p = expf(score - new_max);
        sum = sum * rescale + p;
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int64_t d = c0 + lane + i * kWarpSize;
          if (d < s.hs) acc[i] = acc[i] * rescale + p * v[d];
        }
        max = new_max;
      }
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int64_t d = c0 + lane + i * kWarpSize;
        if (d < s.hs) o[d] = acc[i] / sum;
      }
      if (c0 == 0 && lane == 0) lse[row] = max + logf(sum);
    }
  }
}

// delta[row] = D_t = dout_t . out_t for each query row.
__global__ void AttentionDeltaKernel(const float* out, const float* dout,
                                     float* delta, int64_t rows, Heads s) {
  for (int64_t row = WarpIndex(); row < rows; row += WarpStride()) {
    const HeadRow r = SplitRow(s, row);
    const int64_t off = SliceOffset(s, r.b, r.t, r.h);
    const float d = WarpDot(dout + off, out + off, s.hs);
    if (Lane() == 0) delta[row] = d;
  }
}

// p = softmax(s)_j recomputed from the saved lse, and ds = p (dp - D_t), for
// one (query t, key j) pair. Both gradient kernels call this with the same
// operands, so they agree on every p and ds.
struct PairGrad {
  float p, ds;
};
__device__ PairGrad ScoreGrad(const float* q, const float* k, const float* v,
                              const float* dout_t, float lse_t, float delta_t,
                              const Heads& s) {
  const float p = expf(WarpDot(q, k, s.hs) * s.scale - lse_t);
  const float dp = WarpDot(dout_t, v, s.hs);
  return PairGrad{p, p * (dp - delta_t)};
}

// dq_t = sum_{j <= t} ds_j k_j / sqrt(hs): one warp per query row, keys in
// order.
__global__ void AttentionQueryGradKernel(const float* qkv, const float* dout,
                                         const float* lse, const float* delta,
                                         float* dqkv, int64_t rows, Heads s) {
  const int lane = Lane();
  for (int64_t row = WarpIndex(); row < rows; row += WarpStride()) {
    const HeadRow r = SplitRow(s, row);
    const float* q = QueryOf(qkv, s, r.b, r.t, r.h);
    const float* dout_t = dout + SliceOffset(s, r.b, r.t, r.h);
    float* dq = dqkv + (q - qkv);
    const float lse_t = lse[row];
    const float delta_t = delta[row];
    for (int64_t c0 = 0; c0 < s.hs; c0 += kHeadChunk) {
      float acc[kDimsPerLane] = {};
      for (int64_t j = 0; j <= r.t; ++j) {
        const float* k = QueryOf(qkv, s, r.b, j, r.h) + s.C;
        const PairGrad g = ScoreGrad(q, k, k + s.C, dout_t, lse_t, delta_t, s);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int64_t d = c0 + lane + i * kWarpSize;
          if (d < s.hs) acc[i] += g.ds * k[d];
        }
      }
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int64_t d = c0 + lane + i * kWarpSize;
        if (d < s.hs) dq[d] = acc[i] * s.scale;
      }
    }
  }
}

// dk_j = sum_{t >= j} ds_t q_t / sqrt(hs) and dv_j = sum_{t >= j} p_t dout_t:
// one warp per key row, queries in increasing t, so no two threads ever add
// into the same gradient.
__global__ void AttentionKeyValueGradKernel(const float* qkv, const float* dout,
                                            const float* lse,
                                            const float* delta, float* dqkv,
                                            int64_t rows, Heads s) {
  const int lane = Lane();
  for (int64_t row = WarpIndex(); row < rows; row += WarpStride()) {
    const HeadRow r = SplitRow(s, row);  // r.t is the key's position j
    const float* k = QueryOf(qkv, s, r.b, r.t, r.h) + s.C;
    const float* v = k + s.C;
    float* dk = dqkv + (k - qkv);
    float* dv = dk + s.C;
    const int64_t head_rows = row - r.t;  // row (b, h, 0)
    for (int64_t c0 = 0; c0 < s.hs; c0 += kHeadChunk) {
      float dk_acc[kDimsPerLane] = {};
      float dv_acc[kDimsPerLane] = {};
      for (int64_t t = r.t; t < s.T; ++t) {
        const float* q = QueryOf(qkv, s, r.b, t, r.h);
        const float* dout_t = dout + SliceOffset(s, r.b, t, r.h);
        const PairGrad g = ScoreGrad(q, k, v, dout_t, lse[head_rows + t],
                                     delta[head_rows + t], s);
#pragma unroll
        for (int i = 0; i < kDimsPerLane; ++i) {
          const int64_t d = c0 + lane + i * kWarpSize;
          if (d < s.hs) {
            dk_acc[i] += g.ds * q[d];
            dv_acc[i] += g.p * dout_t[d];
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int64_t d = c0 + lane + i * kWarpSize;
        if (d < s.hs) {
          dk[d] = dk_acc[i] * s.scale;
          dv[d] = dv_acc[i];
        }
      }
    }
  }
}

}  // namespace

absl::Status AttentionForward(const float* qkv, float* out, float* lse,
                              int64_t B, int64_t T, int64_t C, int64_t H,
                              cudaStream_t stream) {
  const int64_t rows = B * H * T;
  AttentionForwardKernel<<<WarpBlocks(rows), kAttnThreads, 0, stream>>>(
      qkv, out, lse, rows, MakeHeads(T, C, H));
  return CudaLaunchStatus("AttentionForwardKernel");
}

absl::Status AttentionBackward(const float* qkv, const float* out,
                               const float* dout, const float* lse, float* dqkv,
                               int64_t B, int64_t T, int64_t C, int64_t H,
                               float* scratch, cudaStream_t stream) {
  const int64_t rows = B * H * T;
  const Heads s = MakeHeads(T, C, H);
  const int blocks = WarpBlocks(rows);
  AttentionDeltaKernel<<<blocks, kAttnThreads, 0, stream>>>(out, dout, scratch,
                                                            rows, s);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("AttentionDeltaKernel"));
  AttentionQueryGradKernel<<<blocks, kAttnThreads, 0, stream>>>(
      qkv, dout, lse, scratch, dqkv, rows, s);
  STRATA_RETURN_IF_ERROR(CudaLaunchStatus("AttentionQueryGradKernel"));
  AttentionKeyValueGradKernel<<<blocks, kAttnThreads, 0, stream>>>(
      qkv, dout, lse, scratch, dqkv, rows, s);
  return CudaLaunchStatus("AttentionKeyValueGradKernel");
}

}  // namespace strata::train::kernels
