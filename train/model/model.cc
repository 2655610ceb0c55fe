// model.cc: the Mlp (see model.h): its creation, forward pass, loss and
// training step; its tensors are mlp_tensors.cc's, its backward pass
// mlp_backward.cc's.
#include "train/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "strata/status.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/half.h"
#include "train/model/footprint.h"
#include "train/model/lease_group.h"
#include "train/model/model_sharding.h"

namespace strata::train {

namespace {

constexpr uint64_t kF = sizeof(float);

}  // namespace

// The layer sizes: inputs -> width x depth -> classes.
std::vector<std::pair<int64_t, int64_t>> LayerShapes(const ModelConfig& c) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int64_t in = c.inputs;
  for (int l = 0; l < c.depth; ++l) {
    shapes.emplace_back(in, c.width);
    in = c.width;
  }
  shapes.emplace_back(in, c.classes);
  return shapes;
}

Mlp::Mlp(Store* store, Compute* compute, const ModelConfig& config,
         const ModelFootprint& footprint, Collectives* collectives)
    : collectives_(collectives),
      store_(store),
      compute_(compute),
      config_(config),
      footprint_(footprint),
      lr_(config.adam.lr) {}

Mlp::~Mlp() {
  AbandonPass();  // a failed sharded step's leases
  for (TensorId id : created_) store_->Destroy(id).IgnoreError();
}

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(Store* store, Compute* compute,
                                                 const ModelConfig& config,
                                                 Collectives* collectives) {
  STRATA_ASSIGN_OR_RETURN(
      ModelFootprint footprint,
      ComputeFootprint(config, collectives ? collectives->size() : 0));
  if (collectives != nullptr) {
    STRATA_RETURN_IF_ERROR(CheckShardable(config, *compute, *collectives,
                                          store->GetStats().device_memory));
    collectives->OrderAfter(compute->stream());  // a GPU transport's order
  }
  STRATA_RETURN_IF_ERROR(
      CheckFootprintFits(store->GetStats(), config, footprint));
  std::unique_ptr<Mlp> mlp(
      new Mlp(store, compute, config, footprint, collectives));
  mlp->stream_optimizer_ =
      collectives == nullptr &&
      StreamsOptimizer(store->GetStats(), config, footprint);
  if (config.precision == Precision::kFp16) {
    STRATA_ASSIGN_OR_RETURN(mlp->loss_scale_,
                            DynamicLossScale::Create(config.loss_scale));
  }
  STRATA_RETURN_IF_ERROR(mlp->CreateTensors());
  STRATA_RETURN_IF_ERROR(mlp->InitWeights());
  return mlp;
}

absl::Status Mlp::UploadBatch(const float* images, const int32_t* labels,
                              int64_t rows, int max_micro_batches) {
  const int64_t batch = config_.batch;
  if (rows < 1 || rows > batch * max_micro_batches) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch of %d rows: must be 1..%d", rows, batch * max_micro_batches));
  }
  used_ = static_cast<int>((rows + batch - 1) / batch);
  for (int k = 0; k < used_; ++k) {
    MicroBatch& m = micro_[k];
    m.first = k * batch;  // of this rank's rows
    m.rows = std::min(batch, rows - m.first);
    STRATA_RETURN_IF_ERROR(store_->Write(m.input,
                                         images + m.first * config_.inputs,
                                         m.rows * config_.inputs * kF));
    Produced(m.input, m.rows * config_.inputs * kF);
    STRATA_RETURN_IF_ERROR(
        store_->Write(m.labels, labels + m.first, m.rows * sizeof(int32_t)));
    Produced(m.labels, m.rows * sizeof(int32_t));
  }
  return absl::OkStatus();
}

absl::Status Mlp::Forward(bool for_backward) {
  for (int l = 0; l < layers(); ++l) {
    if (sharded()) {
      STRATA_RETURN_IF_ERROR(EnsureGathered(l));
      // The next layer's gather runs while this one computes.
      if (l + 1 < layers()) STRATA_RETURN_IF_ERROR(StartGather(l + 1));
    }
    for (int k = 0; k < used_; ++k) {
      STRATA_RETURN_IF_ERROR(ForwardLayer(l, k));
      if (for_backward) continue;
      // A hidden layer's pre-activation only feeds the backward; its input
      // (the previous layer's activation) was read for the last time.
      if (layers_[l].hidden) STRATA_RETURN_IF_ERROR(Drop(Z(layers_[l], k)));
      if (l > 0) STRATA_RETURN_IF_ERROR(Drop(layers_[l - 1].a[k]));
    }
  }
  return absl::OkStatus();
}

std::pair<int, int> Mlp::AddWeights(int l, LeaseGroup& g) {
  if (sharded()) return {-1, -1};
  return {g.Add(layers_[l].w, Access::kRead),
          g.Add(layers_[l].b, Access::kRead)};
}

const float* Mlp::Weight(int l, const LeaseGroup& g, int index,
                         bool bias) const {
  if (index >= 0) return g.data(index);
  return SlotData(l % 2, bias ? kSlotB : kSlotW);
}

absl::Status Mlp::ForwardLayer(int l, int k) {
  const Layer& L = layers_[l];
  const int64_t rows = micro_[k].rows;
  // Under checkpointing the pre-activation is not kept: the Linear writes
  // into the activation and the activation is applied in place (the same
  // operations on the same values as through z).
  const bool keep_z = !L.hidden || KeepsPreActivation();
  const TensorId x_id = LayerInput(l, k);
  LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
  const int x = g.Add(x_id, Access::kRead);
  const auto [w, b] = AddWeights(l, g);
  const int z = keep_z ? g.Add(L.z[k], Access::kOverwrite) : -1;
  const int a = L.hidden ? g.Add(L.a[k], Access::kOverwrite) : -1;
  STRATA_RETURN_IF_ERROR(g.Acquire());
  float* const out = g.data(keep_z ? z : a);
  STRATA_RETURN_IF_ERROR(LinearForwardOn(L, g.data(x), Weight(l, g, w, false),
                                         Weight(l, g, b, true), out, rows));
  if (L.hidden) {
    STRATA_RETURN_IF_ERROR(compute_->ActivationForward(
        config_.activation, out, g.data(a), rows * L.out));
  }
  STRATA_RETURN_IF_ERROR(g.Release());
  if (keep_z) Produced(L.z[k], rows * L.out * kF);
  if (L.hidden) Produced(L.a[k], rows * L.out * kF);
  // Offload: this layer was the kept input's last reader in forward; send it
  // to the host tier now rather than when device room runs out.
  if (config_.checkpoint == ActivationCheckpointing::kOffload) {
    return store_->Evict(x_id, Tier::kHost);
  }
  return absl::OkStatus();
}

absl::Status Mlp::LinearForwardOn(const Layer& L, const float* x,
                                  const float* w, const float* b, float* y,
                                  int64_t rows) {
  if (mixed()) {
    return compute_->LinearForward16(
        config_.precision, x, reinterpret_cast<const uint16_t*>(w),
        reinterpret_cast<const uint16_t*>(b), y, rows, L.in, L.out);
  }
  return compute_->LinearForward(x, w, b, y, rows, L.in, L.out);
}

absl::StatusOr<LossResult> Mlp::Loss(bool with_gradient, int64_t total_rows) {
  // fp16 multiplies the loss by the loss scale (a power of two: exact), so
  // small gradients stay above fp16's underflow; the optimizer unscales.
  const double loss_scale = loss_scale_ ? loss_scale_->scale() : 1.0;
  LossResult sum;
  std::vector<LossResult> each;  // sharded: every micro-batch's, for the sum
  for (int k = 0; k < used_; ++k) {
    const MicroBatch& m = micro_[k];
    const TensorId logits_id = layers_.back().z[k];
    LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
    const int logits = g.Add(logits_id, Access::kRead);
    const int labels = g.Add(m.labels, Access::kRead);
    const int dlogits =
        with_gradient ? g.Add(m.dlogits, Access::kOverwrite) : -1;
    STRATA_RETURN_IF_ERROR(g.Acquire());
    float* const d = with_gradient ? g.data(dlogits) : nullptr;
    STRATA_ASSIGN_OR_RETURN(
        LossResult r,
        compute_->SoftmaxCrossEntropy(
            g.data(logits), reinterpret_cast<const int32_t*>(g.data(labels)), d,
            m.rows, config_.classes));
    // The gradient of the mean over the whole step's rows, not this
    // micro-batch's (an exact power of two for equal micro-batches of a
    // power-of-two count).
    if (d != nullptr && (m.rows != total_rows || loss_scale != 1.0)) {
      const float s =
          static_cast<float>(static_cast<double>(m.rows) / total_rows) *
          static_cast<float>(loss_scale);
      STRATA_RETURN_IF_ERROR(compute_->Scale(d, s, m.rows * config_.classes));
    }
    STRATA_RETURN_IF_ERROR(g.Release());
    if (with_gradient) Produced(m.dlogits, m.rows * config_.classes * kF);
    STRATA_RETURN_IF_ERROR(Drop(logits_id));
    STRATA_RETURN_IF_ERROR(Drop(m.labels));
    sum.loss_sum += r.loss_sum;
    sum.correct += r.correct;
    each.push_back(r);
  }
  // Evaluation runs the same rows on every rank: its sum is already global.
  return sharded() && with_gradient ? GatherLoss(each) : sum;
}

AdamParams Mlp::StepAdamParams() const {
  AdamParams p = config_.adam;
  p.lr = lr_;
  const double t = static_cast<double>(steps_ + 1);
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  return p;
}

absl::StatusOr<LossResult> Mlp::TrainStep(const float* images,
                                          const int32_t* labels, int64_t rows) {
  const Stats before = store_->GetStats();
  const int64_t skipped_before = skipped_steps_;
  // Refused before anything is exchanged: the run may go on.
  if (sharded() &&
      rows != int64_t{ranks()} * config_.batch * config_.accumulate) {
    return absl::InvalidArgumentError(
        absl::StrFormat("a sharded step takes %d ranks x %d x %d rows; got %d",
                        ranks(), config_.batch, config_.accumulate, rows));
  }
  STRATA_RETURN_IF_ERROR(failed_);
  const uint64_t sent_before = sharded() ? collectives_->bytes_sent() : 0;
  store_->BeginStep();
  absl::StatusOr<LossResult> result = [&]() -> absl::StatusOr<LossResult> {
    const int64_t mine = rows / ranks();  // sharded: this rank's slice
    const int64_t first = mine * rank();
    STRATA_RETURN_IF_ERROR(UploadBatch(images + first * config_.inputs,
                                       labels + first, mine,
                                       config_.accumulate));
    STRATA_RETURN_IF_ERROR(BeginPass());
    STRATA_RETURN_IF_ERROR(Forward());
    STRATA_ASSIGN_OR_RETURN(LossResult loss, Loss(true, rows));
    STRATA_RETURN_IF_ERROR(Backward(StepAdamParams()));
    STRATA_RETURN_IF_ERROR(EndPass());
    STRATA_RETURN_IF_ERROR(compute_->Synchronize());
    return loss;
  }();
  if (!result.ok()) FailPass(result.status());
  store_->EndStep();
  const Stats after = store_->GetStats();
  for (int i = 0; i < kNumLinks; ++i) {
    train_link_bytes_[i] += after.links[i].bytes - before.links[i].bytes;
  }
  if (sharded()) train_bytes_sent_ += collectives_->bytes_sent() - sent_before;
  // A skipped mixed step (FinishMixedStep) applied no update.
  if (result.ok() && skipped_steps_ == skipped_before) ++steps_;
  return result;
}

absl::StatusOr<LossResult> Mlp::Evaluate(const float* images,
                                         const int32_t* labels, int64_t rows) {
  STRATA_RETURN_IF_ERROR(failed_);
  store_->BeginStep();
  absl::StatusOr<LossResult> result = [&]() -> absl::StatusOr<LossResult> {
    STRATA_RETURN_IF_ERROR(UploadBatch(images, labels, rows, 1));
    STRATA_RETURN_IF_ERROR(BeginPass());
    STRATA_RETURN_IF_ERROR(Forward(/*for_backward=*/false));
    STRATA_ASSIGN_OR_RETURN(LossResult loss, Loss(false, rows));
    STRATA_RETURN_IF_ERROR(EndPass());
    STRATA_RETURN_IF_ERROR(DiscardActivations());
    return loss;
  }();
  if (!result.ok()) FailPass(result.status());
  store_->EndStep();
  return result;
}

}  // namespace strata::train
