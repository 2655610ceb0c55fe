// cpu_reduce.h: sums, dot products and maxima of contiguous floats in a
// fixed order that GCC vectorises without -ffast-math, for the CPU kernels
// (cpu_transformer.h).
//
// A plain `for (i) s += x[i]` stays scalar: the compiler may not reorder
// float additions. These keep kReduceLanes partial results instead, lane l
// taking elements l, l + kReduceLanes, l + 2 kReduceLanes, ..., and fold the
// lanes in halves at the end. The loop over the lanes is elementwise, so it
// becomes vector operations of whatever width the build targets, and the
// order of every addition, hence the bits, is the same on every x86-64 and
// for every vector width. Sixteen partial sums also round less than one
// running sum does. Compile the callers with -ffp-contract=off so no
// multiply-add is fused where the ISA has FMA.
#ifndef STRATA_TRAIN_COMPUTE_CPU_CPU_REDUCE_H_
#define STRATA_TRAIN_COMPUTE_CPU_CPU_REDUCE_H_

#include <cstdint>
#include <limits>
#include <vector>

namespace strata::train {

// Partial results per reduction: four SSE or two AVX registers of floats.
inline constexpr int kReduceLanes = 16;

// acc[l] += acc[l + w] for w = 8, 4, 2, 1; returns acc[0].
template <typename T>
inline T FoldSum(T* acc) {
  for (int w = kReduceLanes / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  }
  return acc[0];
}

// sum of x[i] for i < n (0 for n <= 0).
inline float LaneSum(const float* x, int64_t n) {
  float acc[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int l = 0; l < kReduceLanes; ++l) acc[l] += x[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += x[i + l];
  return FoldSum(acc);
}

// sum of a[i] * b[i] for i < n (0 for n <= 0).
inline float LaneDot(const float* a, const float* b, int64_t n) {
  float acc[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int l = 0; l < kReduceLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i + l < n; ++l) acc[l] += a[i + l] * b[i + l];
  return FoldSum(acc);
}

// sum of (x[i] - c)^2 for i < n: the second pass of a two-pass variance.
inline float LaneSumSquaredDeviation(const float* x, float c, int64_t n) {
  float acc[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int l = 0; l < kReduceLanes; ++l) {
      const float d = x[i + l] - c;
      acc[l] += d * d;
    }
  }
  for (int l = 0; i + l < n; ++l) {
    const float d = x[i + l] - c;
    acc[l] += d * d;
  }
  return FoldSum(acc);
}

// max of x[i] for i < n (-infinity for n <= 0). A maximum is exact, so only
// NaN inputs could tell orders apart; this order is fixed anyway.
inline float LaneMax(const float* x, int64_t n) {
  float acc[kReduceLanes];
  for (float& a : acc) a = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes) {
    for (int l = 0; l < kReduceLanes; ++l) {
      acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
    }
  }
  for (int l = 0; i + l < n; ++l) {
    acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
  }
  for (int w = kReduceLanes / 2; w >= 1; w /= 2) {
    for (int l = 0; l < w; ++l) {
      acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    }
  }
  return acc[0];
}

// db[j] (= or, with `accumulate`, +=) the column sums of dy[rows x cols]
// in chunks of `chunk` rows from row 0: each chunk's rows summed in order in
// float, each chunk's sum added to db[j] in order (kReductionRows in
// compute.h: micro-batches of whole chunks add what one batch adds).
inline void ColumnSumsInChunks(const float* dy, float* db, int64_t rows,
                               int64_t cols, bool accumulate, int64_t chunk) {
  if (!accumulate) {
    for (int64_t j = 0; j < cols; ++j) db[j] = 0.0f;
  }
  std::vector<float> sums(cols);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t end = r0 + chunk < rows ? r0 + chunk : rows;
    for (int64_t j = 0; j < cols; ++j) sums[j] = 0.0f;
    for (int64_t i = r0; i < end; ++i) {
      const float* row = dy + i * cols;
      for (int64_t j = 0; j < cols; ++j) sums[j] += row[j];
    }
    // The first chunk of an overwrite is its sum (0 + s is s, bit for bit,
    // but -0 + 0 is not -0): kept as the sum.
    const bool first = r0 == 0 && !accumulate;
    for (int64_t j = 0; j < cols; ++j) {
      db[j] = first ? sums[j] : db[j] + sums[j];
    }
  }
}

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_CPU_REDUCE_H_
