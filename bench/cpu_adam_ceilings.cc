// cpu_adam_ceilings.cc: the streaming kernels, the divider rate and the cache
// sizes of cpu_adam_ceilings.h. Built at -O3 (bench/CMakeLists.txt) so the
// streams vectorise.
#include "bench/cpu_adam_ceilings.h"

#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace strata::bench {
namespace {

using train::VectorPath;

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The streaming kernels the bound is measured with: restrict-qualified loops
// built for the widest vector unit here (function multiversioning picks the
// clone at load time), so the bound is the machine's, not a slow loop's.
#define STREAM_KERNEL \
  __attribute__((target_clones("avx512f", "avx2", "default"), noinline))

STREAM_KERNEL void TriadLoop(float* __restrict__ c, const float* __restrict__ a,
                             const float* __restrict__ b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + 0.5f * b[i];
}

STREAM_KERNEL void PatternLoop(float* __restrict__ w, float* __restrict__ m,
                               float* __restrict__ v,
                               const float* __restrict__ g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    w[i] = w[i] - 1e-6f * gi;
    m[i] = m[i] * 0.5f + gi;
    v[i] = v[i] * 0.5f + gi * gi;
  }
}

// A cache level's size in bytes from sysfs (what the guest sees; sysconf on
// a VM can report the host's), else sysconf's; 0 if unknown.
double CacheBytes(int index, int sysconf_name) {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" +
                   std::to_string(index) + "/size");
  std::string text;
  if (in >> text && !text.empty()) {
    double bytes = std::atof(text.c_str());
    const char unit = text.back();
    if (unit == 'K') bytes *= 1024;
    if (unit == 'M') bytes *= 1024 * 1024;
    if (bytes > 0) return bytes;
  }
  return double(std::max<long>(0, sysconf(sysconf_name)));
}

// The update's compute floor: one square root and one divide per element,
// which x86 runs on one divider unit per core. Eight independent chains of
// each, `iters` rounds, on the calling thread; returns elements per second.
#if defined(__x86_64__)
float DividerSse(int64_t iters) {
  __m128 a[8], d[8];
  const __m128 b = _mm_set1_ps(1.0000001f);
  for (int i = 0; i < 8; ++i) a[i] = d[i] = _mm_set1_ps(1.5f + i);
  for (int64_t k = 0; k < iters; ++k) {
    for (int i = 0; i < 8; ++i) {
      a[i] = _mm_sqrt_ps(a[i]);
      d[i] = _mm_div_ps(d[i], b);
    }
  }
  float sum = 0;
  for (int i = 0; i < 8; ++i) sum += _mm_cvtss_f32(_mm_add_ps(a[i], d[i]));
  return sum;
}
__attribute__((target("avx2"))) float DividerAvx2(int64_t iters) {
  __m256 a[8], d[8];
  const __m256 b = _mm256_set1_ps(1.0000001f);
  for (int i = 0; i < 8; ++i) a[i] = d[i] = _mm256_set1_ps(1.5f + i);
  for (int64_t k = 0; k < iters; ++k) {
    for (int i = 0; i < 8; ++i) {
      a[i] = _mm256_sqrt_ps(a[i]);
      d[i] = _mm256_div_ps(d[i], b);
    }
  }
  float sum = 0;
  for (int i = 0; i < 8; ++i) {
    sum += _mm256_cvtss_f32(_mm256_add_ps(a[i], d[i]));
  }
  return sum;
}
__attribute__((target("avx512f"))) float DividerAvx512(int64_t iters) {
  __m512 a[8], d[8];
  const __m512 b = _mm512_set1_ps(1.0000001f);
  for (int i = 0; i < 8; ++i) a[i] = d[i] = _mm512_set1_ps(1.5f + i);
  for (int64_t k = 0; k < iters; ++k) {
    for (int i = 0; i < 8; ++i) {
      a[i] = _mm512_maskz_sqrt_ps(__mmask16(0xffff), a[i]);
      d[i] = _mm512_div_ps(d[i], b);
    }
  }
  float sum = 0;
  for (int i = 0; i < 8; ++i) {
    float lanes[16];
    _mm512_storeu_ps(lanes, _mm512_add_ps(a[i], d[i]));
    sum += lanes[0];
  }
  return sum;
}
#endif

double DividerRate(VectorPath path, double min_sample_seconds, int samples) {
#if defined(__x86_64__)
  int lanes = 4;
  float (*fn)(int64_t) = DividerSse;
  if (path == VectorPath::kAvx2) lanes = 8, fn = DividerAvx2;
  if (path == VectorPath::kAvx512) lanes = 16, fn = DividerAvx512;
  volatile float sink = fn(1000);  // warm-up
  int64_t iters = 1000;
  for (;;) {
    const double start = Now();
    sink = fn(iters);
    if (Now() - start >= std::max(min_sample_seconds, 1e-3)) break;
    iters *= 2;
  }
  std::vector<double> rates;
  for (int s = 0; s < samples; ++s) {
    const double start = Now();
    sink = fn(iters);
    rates.push_back(double(iters) * 8 * lanes / (Now() - start));
  }
  (void)sink;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
#else
  (void)path;
  (void)min_sample_seconds;
  (void)samples;
  return 0;
#endif
}

}  // namespace

void StreamTriad(float* c, const float* a, const float* b, int64_t n) {
  TriadLoop(c, a, b, n);
}

void StreamPattern(float* w, float* m, float* v, const float* g, int64_t n) {
  PatternLoop(w, m, v, g, n);
}

double DividerElementsPerSecond(VectorPath path, double min_sample_seconds,
                                int samples) {
  return DividerRate(path, min_sample_seconds, std::max(1, samples));
}

double L2BytesPerCore() { return CacheBytes(2, _SC_LEVEL2_CACHE_SIZE); }
double LlcBytes() { return CacheBytes(3, _SC_LEVEL3_CACHE_SIZE); }

}  // namespace strata::bench
