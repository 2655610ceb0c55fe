// cpu_adam_test.cc: AdamUpdateCpu (and CpuCompute's Adam, which is it)
// against a scalar reference, bit for bit, on every vector path this CPU
// runs and however the update is split across threads; the choice of the
// vector path and its names. Compiled without floating-point contraction
// (tests/CMakeLists.txt), as train/compute/cpu/cpu_adam.cc is.
#include "train/compute/cpu/cpu_adam.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_test_util.h"
#include "tests/util/cpu_compute_test_util.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"

namespace strata::train {

// gtest names a path in failure messages by this.
void PrintTo(VectorPath path, std::ostream* os) { *os << VectorPathName(path); }

namespace {

using ::strata::train::testing::CpuComputeTest;
using ::strata::train::testing::Random;
using ::strata::train::testing::SameBits;

// The documented formula one element at a time; this file is compiled
// without contraction too (tests/CMakeLists.txt), so the bits must agree.
void AdamScalar(const AdamParams& p, float* w, float* m, float* v,
                const float* g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    m[i] = p.beta1 * m[i] + (1.0f - p.beta1) * g[i];
    v[i] = p.beta2 * v[i] + (1.0f - p.beta2) * g[i] * g[i];
    w[i] = w[i] - p.lr * (m[i] * p.correction1) /
                      (std::sqrt(v[i] * p.correction2) + p.eps);
  }
}

struct AdamState {
  std::vector<float> w, m, v, g;
};

AdamState RandomAdamState(int64_t n, uint32_t seed) {
  AdamState s{Random(n, seed), Random(n, seed + 1, 0.1f), Random(n, seed + 2),
              Random(n, seed + 3)};
  for (float& x : s.v) x = std::abs(x) * 1e-2f;  // second moments are >= 0
  return s;
}

AdamParams StepParams(int step) {
  AdamParams p;
  p.lr = 3e-3f;
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(0.9, step)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(0.999, step)));
  return p;
}

bool SameState(const AdamState& a, const AdamState& b) {
  return SameBits(a.w, b.w) && SameBits(a.m, b.m) && SameBits(a.v, b.v);
}

TEST(AdamUpdateCpuTest, MatchesScalarReferenceBitwise) {
  for (int64_t n : {1, 7, 33, 1000, 4099}) {
    AdamState got = RandomAdamState(n, 21);
    got.g[0] = 0.0f;  // zero gradient: the update is driven by m alone
    AdamState want = got;
    for (int step = 1; step <= 3; ++step) {
      const AdamParams p = StepParams(step);
      AdamUpdateCpu(p, got.w.data(), got.m.data(), got.v.data(), got.g.data(),
                    n);
      AdamScalar(p, want.w.data(), want.m.data(), want.v.data(), want.g.data(),
                 n);
    }
    EXPECT_TRUE(SameState(got, want)) << "n=" << n;
  }
}

TEST(AdamUpdateCpuTest, MovesAgainstTheGradient) {
  // Step 1 with bias correction: m_hat = g, v_hat = g^2, so each weight moves
  // by lr * g / (|g| + eps), i.e. about lr against the gradient's sign.
  AdamParams p = StepParams(1);
  std::vector<float> w = {1.0f, 1.0f}, m = {0, 0}, v = {0, 0};
  const std::vector<float> g = {0.5f, -2.0f};
  AdamUpdateCpu(p, w.data(), m.data(), v.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 1.0f - p.lr, 1e-6);
  EXPECT_NEAR(w[1], 1.0f + p.lr, 1e-6);
}

TEST(AdamUpdateCpuTest, ThreadSplitDoesNotChangeBits) {
  const int64_t n = (int64_t{1} << 20) + 123;  // split on 2 or more cores
  const AdamParams p = StepParams(5);
  AdamState whole = RandomAdamState(n, 25);
  AdamState pieces = whole;
  AdamState scalar = whole;
  AdamUpdateCpu(p, whole.w.data(), whole.m.data(), whole.v.data(),
                whole.g.data(), n);
  constexpr int64_t kPiece = 1001;  // one thread each, odd offsets
  for (int64_t at = 0; at < n; at += kPiece) {
    const int64_t len = std::min(kPiece, n - at);
    AdamUpdateCpu(p, pieces.w.data() + at, pieces.m.data() + at,
                  pieces.v.data() + at, pieces.g.data() + at, len);
  }
  AdamScalar(p, scalar.w.data(), scalar.m.data(), scalar.v.data(),
             scalar.g.data(), n);
  EXPECT_TRUE(SameState(whole, pieces));
  EXPECT_TRUE(SameState(whole, scalar));
}

TEST_F(CpuComputeTest, AdamIsAdamUpdateCpu) {
  const int64_t n = 777;
  const AdamParams p = StepParams(2);
  AdamState a = RandomAdamState(n, 30);
  AdamState b = a;
  ASSERT_TRUE(
      compute_->Adam(p, a.w.data(), a.m.data(), a.v.data(), a.g.data(), n)
          .ok());
  AdamUpdateCpu(p, b.w.data(), b.m.data(), b.v.data(), b.g.data(), n);
  EXPECT_TRUE(SameState(a, b));
}

// Values every path must round alike: zero and denormal gradients and
// moments, a gradient whose square overflows to infinity (v = inf, so the
// step is 0), huge and tiny weights. (No NaNs: the paths agree on them, but
// the GPU's canonical NaN need not.)
void AddEdgeValues(AdamState* s) {
  const float denorm = std::numeric_limits<float>::denorm_min();
  const float edge_g[] = {0.0f,   -0.0f, denorm, -denorm * 5,
                          1e-38f, 1e20f, -3e19f, 1e-20f};
  for (size_t i = 0; i < std::size(edge_g) && i < s->g.size(); ++i) {
    s->g[i] = edge_g[i];
  }
  const size_t n = s->w.size();
  if (n > 12) {
    s->m[9] = denorm;
    s->v[9] = denorm;
    s->v[10] = 0.0f;
    s->g[10] = 0.0f;
    s->w[11] = 3e38f;
    s->w[12] = -denorm;
  }
}

class AdamVectorPathTest : public ::testing::TestWithParam<VectorPath> {
 protected:
  void SetUp() override {
    if (!VectorPathSupported(GetParam())) {
      GTEST_SKIP() << "this CPU (or OS) does not run the "
                   << VectorPathName(GetParam())
                   << " path (__builtin_cpu_supports says no), so it cannot "
                      "be checked here";
    }
  }
};

TEST_P(AdamVectorPathTest, MatchesScalarReferenceBitwise) {
  // Lengths around every vector and unroll width, at offsets that leave the
  // arrays unaligned, so the vector body, the tail and unaligned loads all
  // run.
  for (int64_t n :
       {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 1000, 4099}) {
    for (int64_t offset : {0, 1, 3}) {
      AdamState got = RandomAdamState(n + offset, 21 + uint32_t(n));
      AddEdgeValues(&got);
      AdamState want = got;
      for (int step = 1; step <= 3; ++step) {
        const AdamParams p = StepParams(step);
        AdamRange(GetParam(), p, got.w.data() + offset, got.m.data() + offset,
                  got.v.data() + offset, got.g.data() + offset, n);
        AdamScalar(p, want.w.data() + offset, want.m.data() + offset,
                   want.v.data() + offset, want.g.data() + offset, n);
      }
      EXPECT_TRUE(SameState(got, want)) << "n=" << n << " offset=" << offset;
    }
  }
}

TEST_P(AdamVectorPathTest, SplitOverAPoolMatchesScalarReferenceBitwise) {
  HostPool pool(3);
  const int64_t n = 5 * kAdamMinElementsPerThread + 37;  // three odd ranges
  AdamState got = RandomAdamState(n, 40);
  AddEdgeValues(&got);
  AdamState want = got;
  const int64_t jobs_before = pool.split_jobs();
  for (int step = 1; step <= 2; ++step) {
    const AdamParams p = StepParams(step);
    AdamUpdateCpuWith(GetParam(), pool, p, got.w.data(), got.m.data(),
                      got.v.data(), got.g.data(), n);
    AdamScalar(p, want.w.data(), want.m.data(), want.v.data(), want.g.data(),
               n);
  }
  EXPECT_EQ(pool.split_jobs() - jobs_before, 2) << "the update was not split";
  EXPECT_TRUE(SameState(got, want));
}

INSTANTIATE_TEST_SUITE_P(EveryPath, AdamVectorPathTest,
                         ::testing::ValuesIn(kVectorPaths),
                         [](const ::testing::TestParamInfo<VectorPath>& info) {
                           return std::string(VectorPathName(info.param));
                         });

TEST(VectorPathTest, ChosenIsSupportedAndTheWidestUnlessNarrowed) {
  const VectorPath chosen = ChosenVectorPath();
  EXPECT_TRUE(VectorPathSupported(chosen)) << VectorPathName(chosen);
  EXPECT_TRUE(VectorPathSupported(VectorPath::kBaseline));
  if (std::getenv("STRATA_VECTOR_PATH") == nullptr) {
    for (VectorPath path : kVectorPaths) {
      if (VectorPathSupported(path)) {
        EXPECT_GE(static_cast<int>(chosen), static_cast<int>(path))
            << VectorPathName(path) << " runs here but "
            << VectorPathName(chosen) << " was chosen";
      }
    }
  }
}

TEST(VectorPathTest, NamesRoundTrip) {
  for (VectorPath path : kVectorPaths) {
    absl::StatusOr<VectorPath> parsed = ParseVectorPath(VectorPathName(path));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, path);
  }
  absl::StatusOr<VectorPath> bad = ParseVectorPath("avx3");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("avx2"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace strata::train
