// cpu_attention.cc: AttentionForwardCpu and AttentionBackwardCpu (see
// cpu_transformer.h), causal self-attention one (b, h) pair at a time.
//
// A pair owns head h's columns of out[b] and dqkv[b] and row (b, h) of lse,
// so pairs run on any thread in any order without changing a bit; within a
// pair everything runs in the order of t, then j. Scratch is one row of T
// scores per piece of work: the T x T matrix is never stored. Built with
// -O3 -ffp-contract=off -fno-math-errno as cpu_transformer.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/cpu/cpu_reduce.h"
#include "train/compute/cpu/cpu_transformer.h"

namespace strata::train {
namespace {

// The sizes of one call and where a pair's vectors live in qkv [B x T x 3C].
struct Heads {
  int64_t T, C, H;
  int64_t hs;   // C / H floats per head
  float scale;  // 1 / sqrt(hs)

  int64_t row() const { return 3 * C; }
  // Offset of (b, t)'s q for head h; its k is C further, its v 2 C further.
  int64_t qkv(int64_t b, int64_t t, int64_t h) const {
    return (b * T + t) * row() + h * hs;
  }
  // Offset of (b, t)'s head h in out and dout [B x T x C].
  int64_t out(int64_t b, int64_t t, int64_t h) const {
    return (b * T + t) * C + h * hs;
  }
};

absl::Status CheckAttention(const char* op, int64_t B, int64_t T, int64_t C,
                            int64_t H) {
  if (B < 0 || T < 0 || C < 1 || H < 1 || C % H != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s needs B, T >= 0 and C >= 1 split into H >= 1 equal heads, got "
        "B=%d T=%d C=%d H=%d",
        op, B, T, C, H));
  }
  return absl::OkStatus();
}

Heads MakeHeads(int64_t T, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  return {T, C, H, hs, 1.0f / std::sqrt(static_cast<float>(hs))};
}

// s[j] = q . k_j * scale for j <= t: the scores both passes compute alike.
void Scores(const Heads& g, const float* qkv, int64_t b, int64_t h, int64_t t,
            float* s) {
  const float* q = qkv + g.qkv(b, t, h);
  for (int64_t j = 0; j <= t; ++j) {
    s[j] = LaneDot(q, qkv + g.qkv(b, j, h) + g.C, g.hs) * g.scale;
  }
}

// out and lse of query t of pair (b, h); `p` holds T floats.
void ForwardQuery(const Heads& g, const float* qkv, float* out, float* lse,
                  int64_t b, int64_t h, int64_t t, float* p) {
  Scores(g, qkv, b, h, t, p);
  const float max = LaneMax(p, t + 1);
  for (int64_t j = 0; j <= t; ++j) p[j] = std::exp(p[j] - max);
  const float sum = LaneSum(p, t + 1);
  lse[(b * g.H + h) * g.T + t] = max + std::log(sum);
  float* o = out + g.out(b, t, h);
  for (int64_t i = 0; i < g.hs; ++i) o[i] = 0.0f;
  for (int64_t j = 0; j <= t; ++j) {
    const float pj = p[j] / sum;
    const float* v = qkv + g.qkv(b, j, h) + 2 * g.C;
    for (int64_t i = 0; i < g.hs; ++i) o[i] += pj * v[i];
  }
}

// Query t's terms of dq_t and of dk_j, dv_j for j <= t, pair (b, h);
// `p` holds T floats.
void BackwardQuery(const Heads& g, const float* qkv, const float* out,
                   const float* dout, const float* lse, float* dqkv, int64_t b,
                   int64_t h, int64_t t, float* p) {
  Scores(g, qkv, b, h, t, p);
  const float l = lse[(b * g.H + h) * g.T + t];
  for (int64_t j = 0; j <= t; ++j) p[j] = std::exp(p[j] - l);
  const float* q = qkv + g.qkv(b, t, h);
  const float* d = dout + g.out(b, t, h);
  const float D = LaneDot(d, out + g.out(b, t, h), g.hs);
  float* dq = dqkv + g.qkv(b, t, h);
  for (int64_t j = 0; j <= t; ++j) {
    const float* k = qkv + g.qkv(b, j, h) + g.C;
    const float* v = k + g.C;
    float* dk = dqkv + g.qkv(b, j, h) + g.C;
    float* dv = dk + g.C;
    const float ds = p[j] * (LaneDot(d, v, g.hs) - D);
    const float ds_scaled = ds * g.scale;
    for (int64_t i = 0; i < g.hs; ++i) dq[i] += ds * k[i];
    for (int64_t i = 0; i < g.hs; ++i) dk[i] += ds_scaled * q[i];
    for (int64_t i = 0; i < g.hs; ++i) dv[i] += p[j] * d[i];
  }
  for (int64_t i = 0; i < g.hs; ++i) dq[i] *= g.scale;
}

// Float operations of one pair's forward (the backward's is about twice):
// T^2 / 2 scores and weighted sums of hs each, two operations an element.
int64_t PairFlops(const Heads& g) { return 2 * g.T * g.T * g.hs + g.T; }

// Pair `pair` = b H + h of the forward; `p` holds T floats.
void ForwardPair(const Heads& g, const float* qkv, float* out, float* lse,
                 int64_t pair, float* p) {
  const int64_t b = pair / g.H, h = pair % g.H;
  for (int64_t t = 0; t < g.T; ++t) ForwardQuery(g, qkv, out, lse, b, h, t, p);
}

// Pair `pair` = b H + h of the backward: its columns of dqkv zeroed, then
// every query's terms added in order of t; `p` holds T floats.
void BackwardPair(const Heads& g, const float* qkv, const float* out,
                  const float* dout, const float* lse, float* dqkv,
                  int64_t pair, float* p) {
  const int64_t b = pair / g.H, h = pair % g.H;
  for (int64_t t = 0; t < g.T; ++t) {
    float* d = dqkv + g.qkv(b, t, h);
    for (int64_t part = 0; part < 3; ++part) {
      std::fill_n(d + part * g.C, g.hs, 0.0f);
    }
  }
  for (int64_t t = 0; t < g.T; ++t) {
    BackwardQuery(g, qkv, out, dout, lse, dqkv, b, h, t, p);
  }
}

}  // namespace

absl::Status AttentionForwardCpu(const float* qkv, float* out, float* lse,
                                 int64_t B, int64_t T, int64_t C, int64_t H,
                                 HostPool& pool) {
  STRATA_RETURN_IF_ERROR(CheckAttention("AttentionForward", B, T, C, H));
  const Heads g = MakeHeads(T, C, H);
  pool.ParallelFor(B * H, MinItemsPerThread(PairFlops(g)), 1,
                   [&](int64_t begin, int64_t end) {
                     std::vector<float> p(T);
                     for (int64_t pair = begin; pair < end; ++pair) {
                       ForwardPair(g, qkv, out, lse, pair, p.data());
                     }
                   });
  return absl::OkStatus();
}

absl::Status AttentionBackwardCpu(const float* qkv, const float* out,
                                  const float* dout, const float* lse,
                                  float* dqkv, int64_t B, int64_t T, int64_t C,
                                  int64_t H, HostPool& pool) {
  STRATA_RETURN_IF_ERROR(CheckAttention("AttentionBackward", B, T, C, H));
  const Heads g = MakeHeads(T, C, H);
  pool.ParallelFor(B * H, MinItemsPerThread(2 * PairFlops(g)), 1,
                   [&](int64_t begin, int64_t end) {
                     std::vector<float> p(T);
                     for (int64_t pair = begin; pair < end; ++pair) {
                       BackwardPair(g, qkv, out, dout, lse, dqkv, pair,
                                    p.data());
                     }
                   });
  return absl::OkStatus();
}

}  // namespace strata::train
