// compute_test_util.h: random inputs and bit comparison shared by the
// compute tests (CPU against references, GPU against CPU).
#ifndef STRATA_TESTS_UTIL_COMPUTE_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_COMPUTE_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace strata::train::testing {

// n floats uniform in [-scale, scale), fixed by `seed`.
inline std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// n labels uniform in [0, classes), fixed by `seed`.
inline std::vector<int32_t> RandomLabels(int64_t n, int32_t classes,
                                         uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, classes - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// True when a and b hold the same floats bit for bit.
inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Element i of `got` is within rtol * |want| + atol of `want` (a double
// reference).
inline void ExpectNearReference(const std::vector<float>& got,
                                const std::vector<double>& want, double rtol,
                                double atol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * std::abs(want[i]) + atol)
        << what << "[" << i << "]";
  }
}

}  // namespace strata::train::testing

#endif  // STRATA_TESTS_UTIL_COMPUTE_TEST_UTIL_H_
