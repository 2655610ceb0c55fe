// clipped_adamw_test.cc: ClippedAdamW against AdamW and clipping computed by
// hand — a step within the limit is plain AdamW (decay on 2-D weights only)
// and leaves no backup, a step beyond it restores every speculative update
// bit for bit and its re-run equals clipping before any update.
#include "train/model/clipped_adamw.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/compute_test_util.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"

namespace strata::train {
namespace {

using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using ::strata::train::testing::Random;

struct HostSlot {
  std::vector<float> w, g, m, v;
};

class ClippedAdamWTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions so =
        SmallStoreOptions(dir_.path(), 4 * kMiB, 4 * kMiB, 16 * kMiB);
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(so);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    compute_ = MakeCpuCompute(1);
    // Group a: a decayed weight and an undecayed bias; group b (last): one.
    AddSlot(&a_, 300, true, 1);
    AddSlot(&a_, 7, false, 2);
    a_.backup = Create(3 * (300 + 7));
    AddSlot(&b_, 50, true, 3, 10.0f);  // most of the norm comes last
    adam_.lr = 0.01f;
    adam_.correction1 = 10.0f;  // 1 / (1 - 0.9)
    adam_.correction2 = 1000.0f;
  }

  TensorId Create(int64_t n) {
    absl::StatusOr<TensorId> id =
        store_->Create({.name = "t" + std::to_string(next_++),
                        .size_bytes = static_cast<uint64_t>(n) * 4,
                        .dtype = DType::kFloat32,
                        .shape = {n},
                        .home = Tier::kNvme});
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }

  void AddSlot(ParamGroup* group, int64_t n, bool decay, uint32_t seed,
               float grad_scale = 1.0f) {
    ParamSlot s{.decay = decay, .bytes = static_cast<uint64_t>(n) * 4};
    s.w = Create(n), s.g = Create(n), s.m = Create(n), s.v = Create(n);
    HostSlot h{.w = Random(n, seed),
               .g = Random(n, seed + 10, grad_scale),
               .m = Random(n, seed + 20, 0.1f),
               .v = Random(n, seed + 30, 0.01f)};
    for (float& x : h.v) x = std::fabs(x);
    Put(s.w, h.w), Put(s.m, h.m), Put(s.v, h.v);
    group->params.push_back(s);
    host_.push_back(h);
  }

  void Put(TensorId id, const std::vector<float>& x) {
    ASSERT_TRUE(store_->Write(id, x.data(), x.size() * 4).ok());
  }
  std::vector<float> Get(TensorId id, size_t n) {
    std::vector<float> x(n);
    EXPECT_TRUE(store_->Read(id, x.data(), n * 4).ok());
    return x;
  }
  std::vector<const ParamSlot*> Slots() {
    return {&a_.params[0], &a_.params[1], &b_.params[0]};
  }
  void WriteGradients() {
    for (size_t i = 0; i < host_.size(); ++i) Put(Slots()[i]->g, host_[i].g);
  }

  // The global norm as ClippedAdamW must sum it: per tensor in double,
  // tensors in completion order.
  double Norm() {
    double sum = 0;
    for (const HostSlot& h : host_) {
      sum += *compute_->SumOfSquares(h.g.data(), h.g.size());
    }
    return std::sqrt(sum);
  }

  // AdamW with gradients scaled by `coef`, on copies of the host state.
  std::vector<HostSlot> Expected(float coef, float weight_decay) {
    std::vector<HostSlot> out = host_;
    for (size_t i = 0; i < out.size(); ++i) {
      HostSlot& h = out[i];
      const int64_t n = h.w.size();
      if (Slots()[i]->decay)
        ScaleCpu(h.w.data(), 1 - adam_.lr * weight_decay, n);
      if (coef != 1.0f) ScaleCpu(h.g.data(), coef, n);
      AdamUpdateCpu(adam_, h.w.data(), h.m.data(), h.v.data(), h.g.data(), n);
    }
    return out;
  }

  void ExpectState(const std::vector<HostSlot>& want) {
    for (size_t i = 0; i < want.size(); ++i) {
      const ParamSlot& s = *Slots()[i];
      EXPECT_EQ(Get(s.w, want[i].w.size()), want[i].w) << "slot " << i;
      EXPECT_EQ(Get(s.m, want[i].m.size()), want[i].m) << "slot " << i;
      EXPECT_EQ(Get(s.v, want[i].v.size()), want[i].v) << "slot " << i;
    }
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Compute> compute_;
  ParamGroup a_, b_;
  std::vector<HostSlot> host_;
  AdamParams adam_;
  int next_ = 0;
};

TEST_F(ClippedAdamWTest, WithinTheLimitIsPlainAdamWAndDropsTheBackup) {
  ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                   {.max_norm = 1e6f, .weight_decay = 0.1f}, nullptr);
  WriteGradients();
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  absl::StatusOr<std::optional<float>> rerun = opt.EndStep(b_);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_FALSE(rerun->has_value());
  ExpectState(Expected(1.0f, 0.1f));
  EXPECT_EQ(opt.stats().clipped, 0);
  EXPECT_EQ(opt.stats().backup_bytes, a_.backup_bytes());
  EXPECT_DOUBLE_EQ(opt.stats().last_norm, Norm());
  // Confirmed: the backup holds nothing, and the gradients are discarded.
  EXPECT_FALSE(store_->GetResidency(a_.backup)->has_contents);
  EXPECT_FALSE(store_->GetResidency(a_.params[0].g)->has_contents);
}

TEST_F(ClippedAdamWTest, BeyondTheLimitRestoresThenReRunsClipped) {
  const float max_norm = 0.5f * static_cast<float>(Norm());
  // Group a alone stays under the limit, so it is updated speculatively.
  ASSERT_LT(std::sqrt(*compute_->SumOfSquares(host_[0].g.data(), 300) +
                      *compute_->SumOfSquares(host_[1].g.data(), 7)),
            max_norm)
      << "the test's gradients no longer exercise a speculative update";
  ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                   {.max_norm = max_norm, .weight_decay = 0.1f}, nullptr);
  WriteGradients();
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  absl::StatusOr<std::optional<float>> rerun = opt.EndStep(b_);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  ASSERT_TRUE(rerun->has_value());
  const float coef = static_cast<float>(max_norm / (Norm() + 1e-6));
  EXPECT_EQ(**rerun, coef);
  ExpectState(host_);  // every bit restored
  EXPECT_EQ(opt.stats().rolled_back, 1);

  WriteGradients();  // the re-run's backward recomputes them
  opt.BeginStep(adam_, coef);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  rerun = opt.EndStep(b_);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_FALSE(rerun->has_value());
  ExpectState(Expected(coef, 0.1f));
  EXPECT_EQ(opt.stats().steps, 1);
  EXPECT_EQ(opt.stats().clipped, 1);
}

TEST_F(ClippedAdamWTest, AStepAfterAClipWaitsForTheNormAndGivesTheSameBits) {
  const float max_norm = 0.5f * static_cast<float>(Norm());
  const float coef = static_cast<float>(max_norm / (Norm() + 1e-6));
  ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                   {.max_norm = max_norm, .weight_decay = 0.1f}, nullptr);
  WriteGradients();  // step 1: speculates, clips, restores, re-runs
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  ASSERT_EQ(*opt.EndStep(b_), coef);
  WriteGradients();
  opt.BeginStep(adam_, coef);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  ASSERT_TRUE(opt.EndStep(b_).ok());
  for (size_t i = 0; i < host_.size(); ++i) {  // the state after step 1
    const ParamSlot& s = *Slots()[i];
    host_[i].w = Get(s.w, host_[i].w.size());
    host_[i].m = Get(s.m, host_[i].m.size());
    host_[i].v = Get(s.v, host_[i].v.size());
  }
  WriteGradients();  // step 2, the same gradients: deferred
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  EXPECT_EQ(Get(a_.params[0].w, 300), host_[0].w);  // not updated yet
  EXPECT_TRUE(store_->GetResidency(a_.params[0].g)->has_contents);
  absl::StatusOr<std::optional<float>> rerun = opt.EndStep(b_);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_FALSE(rerun->has_value());  // exact without a re-run
  ExpectState(Expected(coef, 0.1f));
  EXPECT_FALSE(store_->GetResidency(a_.params[0].g)->has_contents);
  EXPECT_EQ(opt.stats().steps, 2);
  EXPECT_EQ(opt.stats().clipped, 2);
  EXPECT_EQ(opt.stats().rolled_back, 1);
  EXPECT_EQ(opt.stats().deferred, 1);
}

TEST_F(ClippedAdamWTest, SpeculatesAgainAfterEightStepsWithinTheLimit) {
  const float max_norm = 0.5f * static_cast<float>(Norm());
  ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                   {.max_norm = max_norm, .weight_decay = 0.1f}, nullptr);
  WriteGradients();  // clips once: a is speculated, restored, re-run
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  const float coef = **opt.EndStep(b_);
  WriteGradients();
  opt.BeginStep(adam_, coef);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  ASSERT_TRUE(opt.EndStep(b_).ok());
  for (HostSlot& h : host_) ScaleCpu(h.g.data(), 0.01f, h.g.size());
  const int64_t clean = ClippedAdamW::kCleanStepsToSpeculate;
  for (int64_t i = 0; i <= clean; ++i) {
    WriteGradients();  // within the limit now
    opt.BeginStep(adam_);
    ASSERT_TRUE(opt.GroupComplete(a_).ok());
    ASSERT_FALSE(opt.EndStep(b_)->has_value());
  }
  EXPECT_EQ(opt.stats().deferred, clean);  // then one speculative step
  EXPECT_EQ(opt.stats().backup_bytes, 2 * a_.backup_bytes());
  EXPECT_EQ(opt.stats().clipped, 1);
}

TEST_F(ClippedAdamWTest, ANormAlreadyOverTheLimitSpeculatesNothing) {
  ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                   {.max_norm = 1e-3f, .weight_decay = 0.0f}, nullptr);
  WriteGradients();
  opt.BeginStep(adam_);
  ASSERT_TRUE(opt.GroupComplete(a_).ok());
  absl::StatusOr<std::optional<float>> rerun = opt.EndStep(b_);
  ASSERT_TRUE(rerun.ok());
  ASSERT_TRUE(rerun->has_value());
  ExpectState(host_);
  EXPECT_EQ(opt.stats().clipped, 1);
  EXPECT_EQ(opt.stats().rolled_back, 0);  // nothing had been updated
  EXPECT_EQ(opt.stats().backup_bytes, 0u);
}

TEST_F(ClippedAdamWTest, DeviceTierGivesTheHostTiersBits) {
  for (Tier tier : {Tier::kHost, Tier::kDevice}) {
    SCOPED_TRACE(TierName(tier));
    for (size_t i = 0; i < host_.size(); ++i) {
      Put(Slots()[i]->w, host_[i].w), Put(Slots()[i]->m, host_[i].m);
      Put(Slots()[i]->v, host_[i].v);
    }
    ClippedAdamW opt(store_.get(), compute_.get(), tier,
                     {.max_norm = 1e6f, .weight_decay = 0.1f}, nullptr);
    WriteGradients();
    opt.BeginStep(adam_);
    ASSERT_TRUE(opt.GroupComplete(a_).ok());
    ASSERT_TRUE(opt.EndStep(b_).ok());
    ExpectState(Expected(1.0f, 0.1f));
  }
}

// A sharded mixed step (ZeRO-3): the rank that summed an fp32 slot's whole
// gradient passes its non-finite count in WholeGradient, and the ranks'
// agreement may bring another rank's; either skips the step on every rank,
// restoring the group updated speculatively. Without either it updates.
TEST_F(ClippedAdamWTest, AShardedMixedStepSkipsOnAWholeGradientsNonFinite) {
  struct Case {
    const char* name;
    int64_t whole_nonfinite;  // in the last group's WholeGradient
    int64_t other_rank;       // the agreement adds this
    bool skipped;
  };
  for (const Case& c :
       {Case{"finite", 0, 0, false}, Case{"this rank's", 1, 0, true},
        Case{"another rank's", 0, 1, true}}) {
    SCOPED_TRACE(c.name);
    for (size_t i = 0; i < host_.size(); ++i) {
      Put(Slots()[i]->w, host_[i].w), Put(Slots()[i]->m, host_[i].m);
      Put(Slots()[i]->v, host_[i].v);
    }
    ClippedAdamW opt(store_.get(), compute_.get(), Tier::kHost,
                     {.max_norm = 1e6f, .weight_decay = 0.1f}, nullptr);
    int64_t agreed_on = -1;
    opt.SetAgreement([&](double&, int64_t& nonfinite) {
      agreed_on = nonfinite;
      nonfinite += c.other_rank;
      return absl::OkStatus();
    });
    WriteGradients();
    opt.BeginStep(adam_, std::nullopt, MixedStep{});
    const double a_sum = *compute_->SumOfSquares(host_[0].g.data(), 300) +
                         *compute_->SumOfSquares(host_[1].g.data(), 7);
    ASSERT_TRUE(opt.GroupComplete(a_, WholeGradient{a_sum, 0}).ok());
    const double b_sum = *compute_->SumOfSquares(host_[2].g.data(), 50);
    absl::StatusOr<std::optional<float>> rerun =
        opt.EndStep(b_, WholeGradient{c.whole_nonfinite > 0 ? INFINITY : b_sum,
                                      c.whole_nonfinite});
    ASSERT_TRUE(rerun.ok()) << rerun.status();
    EXPECT_FALSE(rerun->has_value());
    EXPECT_EQ(agreed_on, c.whole_nonfinite);
    EXPECT_EQ(opt.step_nonfinite(), c.whole_nonfinite + c.other_rank);
    EXPECT_EQ(opt.stats().steps, c.skipped ? 0 : 1);
    ExpectState(c.skipped ? host_ : Expected(1.0f, 0.1f));
  }
}

}  // namespace
}  // namespace strata::train
