// compute_test.cc: CpuCompute against naive double-precision references —
// linear layers (including odd shapes), a finite-difference gradient check
// through softmax cross-entropy, ReLU/GELU forward and backward, the loss's
// edge cases — and MakeCudaCompute's answer without a GPU. (Its Adam, bit for
// bit against a scalar reference: cpu_adam_test.cc.)
#include "train/compute/compute.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_test_util.h"
#include "tests/util/cpu_compute_test_util.h"

namespace strata::train {
namespace {

using ::strata::train::testing::CpuComputeTest;
using ::strata::train::testing::ExpectNearReference;
using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;
using ::strata::train::testing::SameBits;

struct Shape {
  int64_t batch, in, out;
};
constexpr Shape kShapes[] = {{1, 1, 1},     {3, 5, 7}, {17, 33, 9},
                             {64, 100, 10}, {2, 0, 3}, {0, 4, 6}};

TEST_F(CpuComputeTest, NameAndStream) {
  EXPECT_EQ(compute_->name().rfind("openblas:", 0), 0u) << compute_->name();
  EXPECT_NE(compute_->name().find("-threads"), std::string::npos);
  EXPECT_EQ(compute_->stream(), nullptr);
  EXPECT_TRUE(compute_->Synchronize().ok());
}

TEST_F(CpuComputeTest, LinearForwardMatchesNaive) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << s.batch << "x" << s.in << "->" << s.out);
    const auto x = Random(s.batch * s.in, 1);
    const auto w = Random(s.out * s.in, 2);
    const auto b = Random(s.out, 3);
    std::vector<float> y(s.batch * s.out, std::nanf(""));
    ASSERT_TRUE(compute_
                    ->LinearForward(x.data(), w.data(), b.data(), y.data(),
                                    s.batch, s.in, s.out)
                    .ok());
    std::vector<double> want(y.size());
    for (int64_t i = 0; i < s.batch; ++i) {
      for (int64_t o = 0; o < s.out; ++o) {
        double sum = b[o];
        for (int64_t k = 0; k < s.in; ++k) {
          sum += double{x[i * s.in + k]} * w[o * s.in + k];
        }
        want[i * s.out + o] = sum;
      }
    }
    ExpectNearReference(y, want, 1e-5, 1e-5, "y");
  }
}

TEST_F(CpuComputeTest, LinearBackwardMatchesNaive) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << s.batch << "x" << s.in << "->" << s.out);
    const auto x = Random(s.batch * s.in, 4);
    const auto w = Random(s.out * s.in, 5);
    const auto dy = Random(s.batch * s.out, 6);
    std::vector<float> dw(s.out * s.in, std::nanf(""));
    std::vector<float> db(s.out, std::nanf(""));
    std::vector<float> dx(s.batch * s.in, std::nanf(""));
    ASSERT_TRUE(compute_
                    ->LinearBackward(x.data(), w.data(), dy.data(), dw.data(),
                                     db.data(), dx.data(), s.batch, s.in, s.out,
                                     false)
                    .ok());
    std::vector<double> want_dw(dw.size()), want_dx(dx.size());
    std::vector<float> want_db(s.out, 0.0f);  // float, rows in order: exact
    for (int64_t i = 0; i < s.batch; ++i) {
      for (int64_t o = 0; o < s.out; ++o) {
        const double g = dy[i * s.out + o];
        want_db[o] += dy[i * s.out + o];
        for (int64_t k = 0; k < s.in; ++k) {
          want_dw[o * s.in + k] += g * x[i * s.in + k];
          want_dx[i * s.in + k] += g * w[o * s.in + k];
        }
      }
    }
    ExpectNearReference(dw, want_dw, 1e-5, 1e-5, "dw");
    ExpectNearReference(dx, want_dx, 1e-5, 1e-5, "dx");
    EXPECT_TRUE(SameBits(db, want_db));
  }
}

TEST_F(CpuComputeTest, LinearBackwardWithoutDxLeavesNothingElse) {
  const Shape s{3, 5, 7};
  const auto x = Random(s.batch * s.in, 7);
  const auto w = Random(s.out * s.in, 8);
  const auto dy = Random(s.batch * s.out, 9);
  std::vector<float> dw1(s.out * s.in), db1(s.out), dx(s.batch * s.in);
  std::vector<float> dw2(s.out * s.in), db2(s.out);
  ASSERT_TRUE(compute_
                  ->LinearBackward(x.data(), w.data(), dy.data(), dw1.data(),
                                   db1.data(), dx.data(), s.batch, s.in, s.out,
                                   false)
                  .ok());
  ASSERT_TRUE(compute_
                  ->LinearBackward(x.data(), w.data(), dy.data(), dw2.data(),
                                   db2.data(), nullptr, s.batch, s.in, s.out,
                                   false)
                  .ok());
  EXPECT_TRUE(SameBits(dw1, dw2));
  EXPECT_TRUE(SameBits(db1, db2));
}

TEST_F(CpuComputeTest, LinearBackwardAccumulatesIntoTheGradients) {
  const Shape s{17, 33, 9};
  const auto x = Random(s.batch * s.in, 21);
  const auto w = Random(s.out * s.in, 22);
  const auto dy = Random(s.batch * s.out, 23);
  const auto dw0 = Random(s.out * s.in, 24);  // what earlier micro-batches
  const auto db0 = Random(s.out, 25);         // left in the gradients
  std::vector<float> dw = dw0, db = db0, fresh_dw(dw.size()), fresh_db(s.out);
  std::vector<float> dx(s.batch * s.in), fresh_dx(dx.size());
  ASSERT_TRUE(compute_
                  ->LinearBackward(x.data(), w.data(), dy.data(), dw.data(),
                                   db.data(), dx.data(), s.batch, s.in, s.out,
                                   /*accumulate=*/true)
                  .ok());
  ASSERT_TRUE(compute_
                  ->LinearBackward(x.data(), w.data(), dy.data(),
                                   fresh_dw.data(), fresh_db.data(),
                                   fresh_dx.data(), s.batch, s.in, s.out,
                                   /*accumulate=*/false)
                  .ok());
  std::vector<double> want_dw(dw.size());
  std::vector<float> want_db(s.out);
  for (size_t i = 0; i < dw.size(); ++i) want_dw[i] = dw0[i] + fresh_dw[i];
  for (int64_t j = 0; j < s.out; ++j) want_db[j] = db0[j] + fresh_db[j];
  ExpectNearReference(dw, want_dw, 1e-5, 1e-5, "dw");
  EXPECT_TRUE(SameBits(db, want_db));   // the column sums, then one add
  EXPECT_TRUE(SameBits(dx, fresh_dx));  // dx is never accumulated
}

TEST_F(CpuComputeTest, NegativeDimensionIsInvalidArgument) {
  float f = 0;
  EXPECT_EQ(compute_->LinearForward(&f, &f, &f, &f, -1, 1, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      compute_->LinearBackward(&f, &f, &f, &f, &f, &f, 1, -2, 1, false).code(),
      absl::StatusCode::kInvalidArgument);
}

// Mean softmax cross-entropy of (x w^T + b) against labels, as the gradient
// check's objective; evaluated with the compute under test.
double MeanLoss(Compute& compute, const std::vector<float>& x,
                const std::vector<float>& w, const std::vector<float>& b,
                const std::vector<int32_t>& labels, const Shape& s) {
  std::vector<float> y(s.batch * s.out);
  EXPECT_TRUE(compute
                  .LinearForward(x.data(), w.data(), b.data(), y.data(),
                                 s.batch, s.in, s.out)
                  .ok());
  auto loss = compute.SoftmaxCrossEntropy(y.data(), labels.data(), nullptr,
                                          s.batch, s.out);
  EXPECT_TRUE(loss.ok()) << loss.status();
  return loss.ok() ? loss->loss_sum / s.batch : 0.0;
}

// Central difference of MeanLoss in `param[index]`.
double NumericGrad(Compute& compute, std::vector<float>& param, size_t index,
                   const std::vector<float>& x, const std::vector<float>& w,
                   const std::vector<float>& b,
                   const std::vector<int32_t>& labels, const Shape& s) {
  constexpr float kStep = 1e-2f;
  const float saved = param[index];
  param[index] = saved + kStep;
  const double up = MeanLoss(compute, x, w, b, labels, s);
  param[index] = saved - kStep;
  const double down = MeanLoss(compute, x, w, b, labels, s);
  param[index] = saved;
  return (up - down) / (2.0 * kStep);
}

TEST_F(CpuComputeTest, LinearBackwardPassesGradientCheck) {
  const Shape s{3, 5, 7};
  auto x = Random(s.batch * s.in, 10);
  auto w = Random(s.out * s.in, 11);
  auto b = Random(s.out, 12);
  const auto labels = RandomLabels(s.batch, s.out, 13);
  std::vector<float> y(s.batch * s.out), dy(y.size());
  ASSERT_TRUE(compute_
                  ->LinearForward(x.data(), w.data(), b.data(), y.data(),
                                  s.batch, s.in, s.out)
                  .ok());
  ASSERT_TRUE(compute_
                  ->SoftmaxCrossEntropy(y.data(), labels.data(), dy.data(),
                                        s.batch, s.out)
                  .ok());
  std::vector<float> dw(w.size()), db(b.size()), dx(x.size());
  ASSERT_TRUE(compute_
                  ->LinearBackward(x.data(), w.data(), dy.data(), dw.data(),
                                   db.data(), dx.data(), s.batch, s.in, s.out,
                                   false)
                  .ok());
  // Float losses and a 1e-2 step: expect agreement to ~1e-4 absolute.
  constexpr double kTol = 5e-4;
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(dw[i], NumericGrad(*compute_, w, i, x, w, b, labels, s), kTol)
        << "dw[" << i << "]";
  }
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_NEAR(db[i], NumericGrad(*compute_, b, i, x, w, b, labels, s), kTol)
        << "db[" << i << "]";
  }
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(dx[i], NumericGrad(*compute_, x, i, x, w, b, labels, s), kTol)
        << "dx[" << i << "]";
  }
}

// z values that cover both signs, zero, the GELU derivative's root near
// -0.75 and tails where 1 + erf would cancel.
std::vector<float> ActivationInputs() {
  std::vector<float> z = Random(1000, 14, 6.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -0.7517916f, -12.0f, -5.5f,
                  5.5f, 12.0f, 40.0f, -40.0f}) {
    z.push_back(v);
  }
  return z;
}

double GeluRef(double z) { return 0.5 * z * std::erfc(-z / std::sqrt(2.0)); }

TEST_F(CpuComputeTest, ReluForwardAndBackwardAreExact) {
  const auto z = ActivationInputs();
  const auto da = Random(z.size(), 15);
  const int64_t n = z.size();
  std::vector<float> a(n), dz(n);
  ASSERT_TRUE(
      compute_->ActivationForward(Activation::kRelu, z.data(), a.data(), n)
          .ok());
  ASSERT_TRUE(compute_
                  ->ActivationBackward(Activation::kRelu, z.data(), da.data(),
                                       dz.data(), n)
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[i], z[i] > 0 ? z[i] : 0.0f) << "z=" << z[i];
    EXPECT_EQ(dz[i], z[i] > 0 ? da[i] : 0.0f) << "z=" << z[i];
  }
}

TEST_F(CpuComputeTest, GeluForwardMatchesClosedForm) {
  const auto z = ActivationInputs();
  const int64_t n = z.size();
  std::vector<float> a(n);
  ASSERT_TRUE(
      compute_->ActivationForward(Activation::kGelu, z.data(), a.data(), n)
          .ok());
  for (int64_t i = 0; i < n; ++i) {
    // Relative even in the negative tail, thanks to the erfc form; the float
    // rounding of z / sqrt2 is amplified by erfc's condition number, ~z^2.
    const double want = GeluRef(z[i]);
    const double rtol = 4e-7 * (1.0 + double{z[i]} * z[i]);
    ASSERT_NEAR(a[i], want, rtol * std::abs(want)) << "z=" << z[i];
  }
}

TEST_F(CpuComputeTest, GeluBackwardMatchesFiniteDifference) {
  const auto z = ActivationInputs();
  const auto da = Random(z.size(), 16);
  const int64_t n = z.size();
  std::vector<float> dz(n);
  ASSERT_TRUE(compute_
                  ->ActivationBackward(Activation::kGelu, z.data(), da.data(),
                                       dz.data(), n)
                  .ok());
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) {
    constexpr double kStep = 1e-5;
    const double slope =
        (GeluRef(z[i] + kStep) - GeluRef(z[i] - kStep)) / (2 * kStep);
    want[i] = da[i] * slope;
  }
  ExpectNearReference(dz, want, 1e-5, 2e-7, "gelu'");
}

TEST_F(CpuComputeTest, ActivationsWorkInPlace) {
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    const auto z = ActivationInputs();
    const auto da = Random(z.size(), 17);
    const int64_t n = z.size();
    std::vector<float> a(n), dz(n);
    ASSERT_TRUE(compute_->ActivationForward(act, z.data(), a.data(), n).ok());
    ASSERT_TRUE(
        compute_->ActivationBackward(act, z.data(), da.data(), dz.data(), n)
            .ok());
    auto inplace = z;
    ASSERT_TRUE(
        compute_->ActivationForward(act, inplace.data(), inplace.data(), n)
            .ok());
    EXPECT_TRUE(SameBits(inplace, a));
    auto grad = da;
    ASSERT_TRUE(
        compute_->ActivationBackward(act, z.data(), grad.data(), grad.data(), n)
            .ok());
    EXPECT_TRUE(SameBits(grad, dz));
  }
}

// The loss, argmax count and gradient of softmax cross-entropy in double.
struct XentRef {
  double loss_sum = 0;
  int64_t correct = 0;
  std::vector<double> dlogits;
};

XentRef XentReference(const std::vector<float>& logits,
                      const std::vector<int32_t>& labels, int64_t batch,
                      int64_t classes) {
  XentRef ref;
  ref.dlogits.resize(batch * classes);
  for (int64_t i = 0; i < batch; ++i) {
    const float* z = &logits[i * classes];
    int64_t argmax = 0;
    for (int64_t j = 1; j < classes; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j)
      sum += std::exp(double{z[j]} - z[argmax]);
    ref.loss_sum += std::log(sum) - (double{z[labels[i]]} - z[argmax]);
    ref.correct += argmax == labels[i] ? 1 : 0;
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(double{z[j]} - z[argmax]) / sum;
      ref.dlogits[i * classes + j] = (p - (j == labels[i] ? 1 : 0)) / batch;
    }
  }
  return ref;
}

TEST_F(CpuComputeTest, SoftmaxCrossEntropyMatchesDouble) {
  for (const auto& [batch, classes] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {64, 10}}) {
    SCOPED_TRACE(::testing::Message() << batch << "x" << classes);
    const auto logits = Random(batch * classes, 18, 8.0f);
    const auto labels = RandomLabels(batch, classes, 19);
    std::vector<float> d(logits.size());
    auto got = compute_->SoftmaxCrossEntropy(logits.data(), labels.data(),
                                             d.data(), batch, classes);
    ASSERT_TRUE(got.ok()) << got.status();
    const XentRef ref = XentReference(logits, labels, batch, classes);
    EXPECT_NEAR(got->loss_sum, ref.loss_sum, 1e-5 * ref.loss_sum + 1e-6);
    EXPECT_EQ(got->correct, ref.correct);
    ExpectNearReference(d, ref.dlogits, 1e-5, 1e-7, "dlogits");
    auto no_grad = compute_->SoftmaxCrossEntropy(logits.data(), labels.data(),
                                                 nullptr, batch, classes);
    ASSERT_TRUE(no_grad.ok());
    EXPECT_EQ(no_grad->loss_sum, got->loss_sum);
    EXPECT_EQ(no_grad->correct, got->correct);
  }
}

TEST_F(CpuComputeTest, SoftmaxCrossEntropyIsStableAndTakesFirstMaximum) {
  // Logits that overflow exp() without the max subtraction; rows 1 and 2
  // tie for the maximum at classes 0 and 2.
  const std::vector<float> logits = {1000.0f, 1001.0f, 999.0f,  //
                                     5.0f,    1.0f,    5.0f,    //
                                     5.0f,    1.0f,    5.0f,    //
                                     -1e4f,   0.0f,    -1e4f};
  const std::vector<int32_t> labels = {1, 0, 2, 0};
  std::vector<float> d(logits.size());
  auto got = compute_->SoftmaxCrossEntropy(logits.data(), labels.data(),
                                           d.data(), 4, 3);
  ASSERT_TRUE(got.ok()) << got.status();
  const XentRef ref = XentReference(logits, labels, 4, 3);
  EXPECT_NEAR(got->loss_sum, ref.loss_sum, 1e-5 * ref.loss_sum);
  EXPECT_TRUE(std::isfinite(got->loss_sum));
  EXPECT_EQ(got->correct, 2);  // rows 0 and 1; row 2's label is the 2nd max
  ExpectNearReference(d, ref.dlogits, 1e-5, 1e-7, "dlogits");
}

TEST_F(CpuComputeTest, LabelOutOfRangeIsInvalidArgument) {
  const auto logits = Random(3 * 4, 20);
  for (int32_t bad : {-1, 4, 1000}) {
    const std::vector<int32_t> labels = {0, bad, 3};
    std::vector<float> d(logits.size(), 42.0f);
    auto got = compute_->SoftmaxCrossEntropy(logits.data(), labels.data(),
                                             d.data(), 3, 4);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
    EXPECT_EQ(d, std::vector<float>(d.size(), 42.0f)) << "dlogits was written";
  }
}

TEST(MakeCudaComputeTest, FailsWithAReasonOrNamesTheGpu) {
  auto gpu = MakeCudaCompute();
  if (gpu.ok()) {
    EXPECT_EQ((*gpu)->name().rfind("cublas:", 0), 0u) << (*gpu)->name();
    EXPECT_NE((*gpu)->stream(), nullptr);
  } else {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition)
        << gpu.status();
    EXPECT_FALSE(gpu.status().message().empty());
  }
}

}  // namespace
}  // namespace strata::train
