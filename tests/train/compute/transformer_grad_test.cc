// transformer_grad_test.cc: each backward of the transformer's CPU
// operations (LayerNorm, attention, the embedding, cross-entropy) against
// central finite differences of its own forward, on tiny shapes (B = 2,
// T = 5, C = 8, H = 2, V = 11).
//
// The scalar is L = sum(out * R) for a fixed random R (so dout = R), summed
// in double over the float forward's outputs; for cross-entropy it is the
// returned loss times grad_scale. A step of 1e-2 keeps the differences'
// float rounding near 1e-4 while the truncation error, O(step^2), stays
// below that; a sign error or a missing term is off by far more than the
// tolerances (2% per element plus 1e-3, 1% over the whole vector).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/compute.h"

namespace strata::train {
namespace {

using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;

constexpr int64_t kB = 2, kT = 5, kC = 8, kH = 2, kV = 11;
constexpr int64_t kN = kB * kT;
constexpr float kStep = 1e-2f;

// sum of a[i] * r[i] in double.
double Weighted(const std::vector<float>& a, const std::vector<float>& r) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += double{a[i]} * r[i];
  return sum;
}

// Central differences of loss() in each element of *x against `grad`.
void ExpectGradient(std::vector<float>* x, const std::vector<float>& grad,
                    const std::function<double()>& loss, const char* what) {
  ASSERT_EQ(x->size(), grad.size()) << what;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    const float x0 = (*x)[i];
    const float up = x0 + kStep, down = x0 - kStep;
    (*x)[i] = up;
    const double l_up = loss();
    (*x)[i] = down;
    const double l_down = loss();
    (*x)[i] = x0;
    // The step actually taken, after rounding x0 +- kStep to float.
    const double fd = (l_up - l_down) / (double{up} - double{down});
    EXPECT_NEAR(grad[i], fd, 2e-2 * std::abs(fd) + 1e-3)
        << what << "[" << i << "]";
    err2 += (grad[i] - fd) * (grad[i] - fd);
    ref2 += fd * fd;
  }
  EXPECT_GT(ref2, 0.0) << what << ": the gradient is all zeros";
  EXPECT_LE(std::sqrt(err2), 1e-2 * std::sqrt(ref2)) << what;
}

class TransformerGradTest : public ::testing::Test {
 protected:
  std::unique_ptr<Compute> compute_ = MakeCpuCompute();
};

TEST_F(TransformerGradTest, LayerNormBackward) {
  auto x = Random(kN * kC, 1, 2.0f), w = Random(kC, 2), b = Random(kC, 3);
  for (float& v : w) v += 1.0f;
  const auto r = Random(kN * kC, 4);
  std::vector<float> out(kN * kC), mean(kN), rstd(kN);
  auto loss = [&] {
    EXPECT_TRUE(compute_
                    ->LayerNormForward(x.data(), w.data(), b.data(), out.data(),
                                       mean.data(), rstd.data(), kN, kC)
                    .ok());
    return Weighted(out, r);
  };
  loss();
  std::vector<float> dx(kN * kC, 0.0f), dw(kC, 0.0f), db(kC, 0.0f);
  ASSERT_TRUE(compute_
                  ->LayerNormBackward(x.data(), w.data(), mean.data(),
                                      rstd.data(), r.data(), dx.data(),
                                      dw.data(), db.data(), kN, kC)
                  .ok());
  ExpectGradient(&x, dx, loss, "dx");
  ExpectGradient(&w, dw, loss, "dweight");
  ExpectGradient(&b, db, loss, "dbias");
}

TEST_F(TransformerGradTest, AttentionBackward) {
  auto qkv = Random(kN * 3 * kC, 5, 1.5f);
  const auto r = Random(kN * kC, 6);
  std::vector<float> out(kN * kC), lse(kB * kH * kT);
  auto loss = [&] {
    EXPECT_TRUE(compute_
                    ->AttentionForward(qkv.data(), out.data(), lse.data(), kB,
                                       kT, kC, kH)
                    .ok());
    return Weighted(out, r);
  };
  loss();
  // NaN in: the backward overwrites every element.
  std::vector<float> dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(compute_
                  ->AttentionBackward(qkv.data(), out.data(), r.data(),
                                      lse.data(), dqkv.data(), kB, kT, kC, kH)
                  .ok());
  ExpectGradient(&qkv, dqkv, loss, "dqkv");
}

TEST_F(TransformerGradTest, EmbeddingBackward) {
  const auto tokens = RandomLabels(kN, kV, 7);
  auto wte = Random(kV * kC, 8), wpe = Random(kT * kC, 9);
  const auto r = Random(kN * kC, 10);
  std::vector<float> out(kN * kC);
  auto loss = [&] {
    EXPECT_TRUE(compute_
                    ->EmbeddingForward(tokens.data(), wte.data(), wpe.data(),
                                       out.data(), kB, kT, kC, kV)
                    .ok());
    return Weighted(out, r);
  };
  std::vector<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  ASSERT_TRUE(compute_
                  ->EmbeddingBackward(tokens.data(), r.data(), dwte.data(),
                                      dwpe.data(), kB, kT, kC, kV)
                  .ok());
  // Rows of wte no token uses have a zero gradient: compare them apart.
  std::vector<bool> used(kV, false);
  for (int32_t t : tokens) used[t] = true;
  for (int64_t v = 0; v < kV; ++v) {
    if (used[v]) continue;
    for (int64_t i = 0; i < kC; ++i) EXPECT_EQ(dwte[v * kC + i], 0.0f);
  }
  ExpectGradient(&wte, dwte, loss, "dwte");
  ExpectGradient(&wpe, dwpe, loss, "dwpe");
}

TEST_F(TransformerGradTest, CrossEntropy) {
  auto logits = Random(kN * kV, 11, 3.0f);
  const auto targets = RandomLabels(kN, kV, 12);
  const float grad_scale = 1.0f / 7.0f;
  auto loss = [&] {
    auto l = compute_->CrossEntropy(logits.data(), targets.data(), nullptr, kN,
                                    kV, grad_scale);
    EXPECT_TRUE(l.ok());
    return l.value_or(0.0) * grad_scale;
  };
  std::vector<float> d(logits.size());
  ASSERT_TRUE(compute_
                  ->CrossEntropy(logits.data(), targets.data(), d.data(), kN,
                                 kV, grad_scale)
                  .ok());
  ExpectGradient(&logits, d, loss, "dlogits");
}

}  // namespace
}  // namespace strata::train
