// cpu_adam_baseline.cc: train/compute/cpu/cpu_adam.cc as of commit f9464c1
// (before issue 18), renamed OldAdamUpdateCpu; compiled with the flags it had
// (bench/CMakeLists.txt). Do not improve it: it is the yardstick.
//
// (The original file comment follows.)
// cpu_adam.cc: AdamUpdateCpu, the host reference of the Adam update that the
// CUDA kernel must match bit for bit.
//
// The build compiles this file with -ffp-contract=off (no fused multiply-add,
// which the GPU kernel also avoids with --fmad=false and the _rn intrinsics)
// and -fno-math-errno (so std::sqrt becomes one sqrtps and the loop
// vectorises). Every operation is a correctly rounded IEEE float operation in
// the order compute.h documents, so the vector lanes, the scalar tail, any
// thread split and the GPU all give the same bits.
#include "bench/cpu_adam_baseline.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <thread>

namespace strata::bench {
using train::AdamParams;
namespace {

// Below this many elements a second thread costs more than it saves (a 1 Mi
// element update is ~16 MiB of traffic, a few milliseconds on one core).
constexpr int64_t kTwoThreadMinElements = int64_t{1} << 20;

// Split points are rounded to this many elements so both halves start on a
// cache line and full vectors; the results do not depend on it.
constexpr int64_t kSplitAlignElements = 16;

void AdamRange(const AdamParams& p, float* w, float* m, float* v,
               const float* g, int64_t n) {
  // Hoisted scalars are computed in float exactly as the formula reads, and
  // the CUDA path computes them on the host the same way.
  const float beta1 = p.beta1;
  const float beta2 = p.beta2;
  const float one_minus_beta1 = 1.0f - p.beta1;
  const float one_minus_beta2 = 1.0f - p.beta2;
  const float lr = p.lr;
  const float eps = p.eps;
  const float c1 = p.correction1;
  const float c2 = p.correction2;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = beta1 * m[i] + one_minus_beta1 * gi;
    const float vi = beta2 * v[i] + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] - lr * (mi * c1) / (std::sqrt(vi * c2) + eps);
  }
}

}  // namespace

void OldAdamUpdateCpu(const AdamParams& p, float* w, float* m, float* v,
                      const float* g, int64_t n) {
  if (n <= 0) return;
  if (n < kTwoThreadMinElements) {
    AdamRange(p, w, m, v, g, n);
    return;
  }
  // Elementwise, so splitting cannot change any result: the second half on a
  // helper thread, the first on the caller's.
  const int64_t half = (n / 2) / kSplitAlignElements * kSplitAlignElements;
  std::thread helper(AdamRange, std::cref(p), w + half, m + half, v + half,
                     g + half, n - half);
  AdamRange(p, w, m, v, g, half);
  helper.join();
}

}  // namespace strata::bench
