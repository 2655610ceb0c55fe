// Unit tests for CapacityProfile (scheduler/capacity_profile.h): range adds
// and maxima over a cyclic step, checked against a plain array.
#include "scheduler/capacity_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace strata {
namespace {

TEST(CapacityProfileTest, CyclicIntervalsWrapPastTheEnd) {
  CapacityProfile p(10);
  p.Add(8, 2, 5);  // positions 8, 9, 0, 1
  p.Add(1, 4, 3);  // positions 1, 2, 3
  EXPECT_EQ(p.At(0), 5);
  EXPECT_EQ(p.At(1), 8);
  EXPECT_EQ(p.At(2), 3);
  EXPECT_EQ(p.At(5), 0);
  EXPECT_EQ(p.At(9), 5);
  EXPECT_EQ(p.Max(), 8);
  EXPECT_EQ(p.Max(2, 8), 3);
  EXPECT_EQ(p.Max(9, 1), 5);
  EXPECT_EQ(p.ArgMax(9, 3), 1u);
  EXPECT_EQ(p.Max(4, 4), 0);  // empty
  p.AddAll(2);
  EXPECT_EQ(p.At(5), 2);
  p.Add(8, 2, -5);
  EXPECT_EQ(p.At(0), 2);
}

TEST(CapacityProfileTest, MatchesAPlainArrayOnRandomOperations) {
  std::mt19937 rng(7);
  constexpr size_t kN = 37;
  CapacityProfile p(kN);
  std::vector<int64_t> plain(kN, 0);
  std::uniform_int_distribution<size_t> pos(0, kN - 1);
  std::uniform_int_distribution<int64_t> bytes(-50, 100);
  for (int op = 0; op < 2000; ++op) {
    const size_t from = pos(rng), to = pos(rng);
    const int64_t b = bytes(rng);
    p.Add(from, to, b);
    for (size_t q = from; q != to; q = (q + 1) % kN) plain[q] += b;
    const size_t a = pos(rng), c = pos(rng);
    int64_t want = 0;
    bool any = false;
    for (size_t q = a; q != c; q = (q + 1) % kN) {
      want = any ? std::max(want, plain[q]) : plain[q];
      any = true;
    }
    ASSERT_EQ(p.Max(a, c), any ? want : 0) << "op " << op;
    if (any) {
      ASSERT_EQ(plain[p.ArgMax(a, c)], want) << "op " << op;
    }
  }
  EXPECT_EQ(p.Max(), *std::max_element(plain.begin(), plain.end()));
}

}  // namespace
}  // namespace strata
