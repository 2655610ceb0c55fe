// compute_gpu_test.cc: CudaCompute against CpuCompute on the same random
// inputs — sgemm-based ops within 1e-4 of the GEMM error scale, activations
// (ReLU, both GELUs) and the loss within 1e-5 relative, the bias gradient and
// Adam bit for bit — and every op giving the same bits when run twice. The
// transformer's operations are in transformer_gpu_test.cc. Skips (never passes
// silently) where MakeCudaCompute fails: no GPU, or a build without CUDA.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/compute_gpu_test_util.h"
#include "tests/util/compute_test_util.h"
#include "train/compute/compute.h"

namespace strata::train {
namespace {

using ::strata::train::testing::DeviceArray;
using ::strata::train::testing::ExpectClose;
using ::strata::train::testing::Poison;
using ::strata::train::testing::Random;
using ::strata::train::testing::RandomLabels;
using ::strata::train::testing::SameBits;

struct Shape {
  int64_t batch, in, out;
};
constexpr Shape kShapes[] = {
    {1, 1, 1}, {3, 5, 7}, {33, 129, 10}, {128, 784, 256}, {4, 0, 5}};

// Sum over k of |a[r][k] * b[c][k]| for row-major a[rows x k], b[cols x k]:
// the scale a float dot product's rounding error is relative to.
std::vector<double> AbsProductScale(const std::vector<float>& a,
                                    const std::vector<float>& b, int64_t rows,
                                    int64_t cols, int64_t k) {
  std::vector<double> scale(rows * cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t i = 0; i < k; ++i) {
        scale[r * cols + c] += std::abs(double{a[r * k + i]} * b[c * k + i]);
      }
    }
  }
  return scale;
}

// Row-major transpose of a [rows x cols] matrix.
std::vector<float> Transpose(const std::vector<float>& m, int64_t rows,
                             int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  }
  return t;
}

class ComputeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = MakeCudaCompute();
    if (!gpu.ok()) GTEST_SKIP() << "no CUDA compute: " << gpu.status();
    gpu_ = std::move(*gpu);
  }

  std::unique_ptr<Compute> cpu_ = MakeCpuCompute();
  std::unique_ptr<Compute> gpu_;
};

TEST_F(ComputeGpuTest, NameAndStream) {
  EXPECT_EQ(gpu_->name().rfind("cublas:", 0), 0u) << gpu_->name();
  EXPECT_GT(gpu_->name().size(), 7u);
  EXPECT_NE(gpu_->stream(), nullptr);
  EXPECT_TRUE(gpu_->Synchronize().ok());
}

TEST_F(ComputeGpuTest, LinearForwardMatchesCpu) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << s.batch << "x" << s.in << "->" << s.out);
    const auto x = Random(s.batch * s.in, 1);
    const auto w = Random(s.out * s.in, 2);
    const auto b = Random(s.out, 3);
    auto want = Poison(s.batch * s.out);
    ASSERT_TRUE(cpu_->LinearForward(x.data(), w.data(), b.data(), want.data(),
                                    s.batch, s.in, s.out)
                    .ok());
    DeviceArray<float> dx(x), dw(w), db(b);
    std::vector<float> runs[2];
    for (auto& run : runs) {
      DeviceArray<float> dy(Poison(s.batch * s.out));
      ASSERT_TRUE(gpu_->LinearForward(dx.get(), dw.get(), db.get(), dy.get(),
                                      s.batch, s.in, s.out)
                      .ok());
      run = dy.ToHost();
    }
    EXPECT_TRUE(SameBits(runs[0], runs[1])) << "not deterministic";
    auto scale = AbsProductScale(x, w, s.batch, s.out, s.in);
    for (int64_t i = 0; i < s.batch * s.out; ++i) {
      scale[i] += std::abs(b[i % s.out]);
    }
    ExpectClose(runs[0], want, 1e-4, 0.0, "y", &scale);
  }
}

TEST_F(ComputeGpuTest, LinearBackwardMatchesCpu) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << s.batch << "x" << s.in << "->" << s.out);
    const auto x = Random(s.batch * s.in, 4);
    const auto w = Random(s.out * s.in, 5);
    const auto dy = Random(s.batch * s.out, 6);
    auto want_dw = Poison(s.out * s.in), want_db = Poison(s.out),
         want_dx = Poison(s.batch * s.in);
    ASSERT_TRUE(cpu_->LinearBackward(x.data(), w.data(), dy.data(),
                                     want_dw.data(), want_db.data(),
                                     want_dx.data(), s.batch, s.in, s.out,
                                     false)
                    .ok());
    DeviceArray<float> d_x(x), d_w(w), d_dy(dy);
    std::vector<float> dw[2], db[2], dx[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_dw(Poison(s.out * s.in)), d_db(Poison(s.out)),
          d_dx(Poison(s.batch * s.in));
      ASSERT_TRUE(gpu_->LinearBackward(d_x.get(), d_w.get(), d_dy.get(),
                                       d_dw.get(), d_db.get(), d_dx.get(),
                                       s.batch, s.in, s.out, false)
                      .ok());
      dw[r] = d_dw.ToHost();
      db[r] = d_db.ToHost();
      dx[r] = d_dx.ToHost();
    }
    EXPECT_TRUE(SameBits(dw[0], dw[1]) && SameBits(db[0], db[1]) &&
                SameBits(dx[0], dx[1]))
        << "not deterministic";
    // dw = dy^T x: rows of dy^T against rows of x^T.
    const auto dw_scale =
        AbsProductScale(Transpose(dy, s.batch, s.out),
                        Transpose(x, s.batch, s.in), s.out, s.in, s.batch);
    // dx = dy w: rows of dy against rows of w^T.
    const auto dx_scale =
        AbsProductScale(dy, Transpose(w, s.out, s.in), s.batch, s.in, s.out);
    ExpectClose(dw[0], want_dw, 1e-4, 0.0, "dw", &dw_scale);
    ExpectClose(dx[0], want_dx, 1e-4, 0.0, "dx", &dx_scale);
    // Both sum each column's rows in order in float.
    EXPECT_TRUE(SameBits(db[0], want_db)) << "db differs from the CPU's bits";
  }
}

TEST_F(ComputeGpuTest, LinearBackwardWithoutDx) {
  const Shape s{3, 5, 7};
  const auto x = Random(s.batch * s.in, 7);
  const auto w = Random(s.out * s.in, 8);
  const auto dy = Random(s.batch * s.out, 9);
  DeviceArray<float> d_x(x), d_w(w), d_dy(dy), d_dw(Poison(s.out * s.in)),
      d_db(Poison(s.out));
  ASSERT_TRUE(gpu_->LinearBackward(d_x.get(), d_w.get(), d_dy.get(), d_dw.get(),
                                   d_db.get(), nullptr, s.batch, s.in, s.out,
                                   false)
                  .ok());
  for (float v : d_dw.ToHost()) EXPECT_FALSE(std::isnan(v));
}

TEST_F(ComputeGpuTest, LinearBackwardAccumulatesAsTheCpu) {
  const Shape s{17, 33, 9};
  const auto x = Random(s.batch * s.in, 21);
  const auto w = Random(s.out * s.in, 22);
  const auto dy = Random(s.batch * s.out, 23);
  auto want_dw = Random(s.out * s.in, 24), want_db = Random(s.out, 25);
  DeviceArray<float> d_x(x), d_w(w), d_dy(dy), d_dw(want_dw), d_db(want_db);
  ASSERT_TRUE(cpu_->LinearBackward(x.data(), w.data(), dy.data(),
                                   want_dw.data(), want_db.data(), nullptr,
                                   s.batch, s.in, s.out, /*accumulate=*/true)
                  .ok());
  ASSERT_TRUE(gpu_->LinearBackward(d_x.get(), d_w.get(), d_dy.get(), d_dw.get(),
                                   d_db.get(), nullptr, s.batch, s.in, s.out,
                                   /*accumulate=*/true)
                  .ok());
  ExpectClose(d_dw.ToHost(), want_dw, 1e-4, 1e-4, "dw");
  // Both form the column sums in row order, then add them once.
  EXPECT_TRUE(SameBits(d_db.ToHost(), want_db));
}

std::vector<float> ActivationInputs() {
  std::vector<float> z = Random(100003, 10, 6.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -0.7517916f, -12.0f, -5.5f,
                  5.5f, 12.0f, 40.0f, -40.0f}) {
    z.push_back(v);
  }
  return z;
}

// Each activation's tolerance against the CPU: the absolute floors are where
// the formula cancels (see the comments in the test).
struct ActivationCase {
  Activation act;
  const char* name;
  double forward_atol, backward_atol;
};
constexpr ActivationCase kActivations[] = {
    {Activation::kRelu, "relu", 0.0, 0.0},
    // gelu' cancels to 0 near z = -0.75 from terms of ~0.23.
    {Activation::kGelu, "gelu", 1e-37, 3e-7},
    // 1 + tanh(u) cancels for z << 0 until tanh saturates (z ~ -5.3): an ulp
    // of tanh (6e-8) times 0.5 |z|, and in the derivative 1 - tanh^2 times
    // 0.5 |z| du/dz (up to ~10).
    {Activation::kGeluTanh, "gelu_tanh", 1e-6, 3e-6},
};

TEST_F(ComputeGpuTest, ActivationsMatchCpu) {
  const auto z = ActivationInputs();
  const auto da = Random(z.size(), 11);
  const int64_t n = z.size();
  DeviceArray<float> d_z(z), d_da(da);
  for (const ActivationCase& c : kActivations) {
    SCOPED_TRACE(c.name);
    auto want_a = Poison(n), want_dz = Poison(n);
    ASSERT_TRUE(
        cpu_->ActivationForward(c.act, z.data(), want_a.data(), n).ok());
    ASSERT_TRUE(
        cpu_->ActivationBackward(c.act, z.data(), da.data(), want_dz.data(), n)
            .ok());
    std::vector<float> a[2], dz[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_a(Poison(n)), d_dz(Poison(n));
      ASSERT_TRUE(gpu_->ActivationForward(c.act, d_z.get(), d_a.get(), n).ok());
      ASSERT_TRUE(
          gpu_->ActivationBackward(c.act, d_z.get(), d_da.get(), d_dz.get(), n)
              .ok());
      a[r] = d_a.ToHost();
      dz[r] = d_dz.ToHost();
    }
    EXPECT_TRUE(SameBits(a[0], a[1]) && SameBits(dz[0], dz[1]))
        << "not deterministic";
    if (c.act == Activation::kRelu) {
      EXPECT_TRUE(SameBits(a[0], want_a));
      EXPECT_TRUE(SameBits(dz[0], want_dz));
      continue;
    }
    // CUDA's erfcf/expf/tanhf are within a few ulp of glibc's.
    ExpectClose(a[0], want_a, 1e-5, c.forward_atol, "act");
    ExpectClose(dz[0], want_dz, 1e-5, c.backward_atol, "act'");
  }
}

TEST_F(ComputeGpuTest, ActivationsWorkInPlace) {
  const auto z = ActivationInputs();
  const int64_t n = z.size();
  DeviceArray<float> out_of_place(Poison(n)), in_place(z), d_z(z);
  ASSERT_TRUE(gpu_->ActivationForward(Activation::kGelu, d_z.get(),
                                      out_of_place.get(), n)
                  .ok());
  ASSERT_TRUE(gpu_->ActivationForward(Activation::kGelu, in_place.get(),
                                      in_place.get(), n)
                  .ok());
  EXPECT_TRUE(SameBits(in_place.ToHost(), out_of_place.ToHost()));
}

TEST_F(ComputeGpuTest, SoftmaxCrossEntropyMatchesCpu) {
  // 1000 rows exercise the reduction's strided fold over 256 threads.
  for (const auto& [batch, classes] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 10}, {3, 7}, {256, 10}, {1000, 10}, {5, 1}}) {
    SCOPED_TRACE(::testing::Message() << batch << "x" << classes);
    const auto logits = Random(batch * classes, 12, 8.0f);
    const auto labels = RandomLabels(batch, classes, 13);
    auto want_d = Poison(batch * classes);
    auto want = cpu_->SoftmaxCrossEntropy(logits.data(), labels.data(),
                                          want_d.data(), batch, classes);
    ASSERT_TRUE(want.ok()) << want.status();
    DeviceArray<float> d_logits(logits);
    DeviceArray<int32_t> d_labels(labels);
    LossResult got[2];
    std::vector<float> d[2];
    for (int r = 0; r < 2; ++r) {
      DeviceArray<float> d_d(Poison(batch * classes));
      auto loss = gpu_->SoftmaxCrossEntropy(d_logits.get(), d_labels.get(),
                                            d_d.get(), batch, classes);
      ASSERT_TRUE(loss.ok()) << loss.status();
      got[r] = *loss;
      d[r] = d_d.ToHost();
    }
    EXPECT_EQ(got[0].loss_sum, got[1].loss_sum) << "not deterministic";
    EXPECT_TRUE(SameBits(d[0], d[1])) << "not deterministic";
    EXPECT_NEAR(got[0].loss_sum, want->loss_sum,
                1e-5 * std::abs(want->loss_sum) + 1e-6);
    EXPECT_EQ(got[0].correct, want->correct);
    EXPECT_EQ(got[1].correct, want->correct);
    // softmax - onehot cancels near p = 1; p itself is good to a few ulp.
    ExpectClose(d[0], want_d, 1e-5, 1e-6 / batch, "dlogits");
    auto no_grad = gpu_->SoftmaxCrossEntropy(d_logits.get(), d_labels.get(),
                                             nullptr, batch, classes);
    ASSERT_TRUE(no_grad.ok()) << no_grad.status();
    EXPECT_EQ(no_grad->loss_sum, got[0].loss_sum);
  }
}

TEST_F(ComputeGpuTest, LabelOutOfRangeIsInvalidArgument) {
  const auto logits = Random(300 * 4, 14);
  DeviceArray<float> d_logits(logits);
  for (int32_t bad : {-1, 4}) {
    auto labels = RandomLabels(300, 4, 15);
    labels[200] = bad;
    DeviceArray<int32_t> d_labels(labels);
    auto got = gpu_->SoftmaxCrossEntropy(d_logits.get(), d_labels.get(),
                                         nullptr, 300, 4);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << got.status();
  }
  // The error leaves nothing behind: a good batch still works.
  DeviceArray<int32_t> good(RandomLabels(300, 4, 16));
  EXPECT_TRUE(
      gpu_->SoftmaxCrossEntropy(d_logits.get(), good.get(), nullptr, 300, 4)
          .ok());
}

AdamParams StepParams(int step) {
  AdamParams p;
  p.lr = 3e-3f;
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(0.9, step)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(0.999, step)));
  return p;
}

TEST_F(ComputeGpuTest, AdamMatchesCpuBitwise) {
  for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 20) + 123}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    auto w = Random(n, 17), m = Random(n, 18, 0.1f), v = Random(n, 19),
         g = Random(n, 20);
    for (float& x : v) x = std::abs(x) * 1e-2f;
    DeviceArray<float> d_w(w), d_m(m), d_v(v), d_g(g);
    DeviceArray<float> d_w2(w), d_m2(m), d_v2(v);
    for (int step = 1; step <= 3; ++step) {
      const AdamParams p = StepParams(step);
      AdamUpdateCpu(p, w.data(), m.data(), v.data(), g.data(), n);
      ASSERT_TRUE(
          gpu_->Adam(p, d_w.get(), d_m.get(), d_v.get(), d_g.get(), n).ok());
      ASSERT_TRUE(
          gpu_->Adam(p, d_w2.get(), d_m2.get(), d_v2.get(), d_g.get(), n).ok());
    }
    EXPECT_TRUE(SameBits(d_w.ToHost(), w));
    EXPECT_TRUE(SameBits(d_m.ToHost(), m));
    EXPECT_TRUE(SameBits(d_v.ToHost(), v));
    EXPECT_TRUE(SameBits(d_w.ToHost(), d_w2.ToHost())) << "not deterministic";
  }
}

}  // namespace
}  // namespace strata::train
