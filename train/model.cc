// model.cc: Mlp's tensors, initialisation and training step (see model.h).
#include "train/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "strata/status.h"
#include "train/footprint.h"
#include "train/lease_group.h"

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
         const ModelFootprint& footprint)
    : store_(store),
      compute_(compute),
      config_(config),
      footprint_(footprint),
      lr_(config.adam.lr) {}

Mlp::~Mlp() {
  for (TensorId id : created_) store_->Destroy(id).IgnoreError();
}

absl::StatusOr<std::unique_ptr<Mlp>> Mlp::Create(Store* store, Compute* compute,
                                                 const ModelConfig& config) {
  STRATA_ASSIGN_OR_RETURN(ModelFootprint footprint, ComputeFootprint(config));
  STRATA_RETURN_IF_ERROR(
      CheckFootprintFits(store->GetStats(), config, footprint));
  std::unique_ptr<Mlp> mlp(new Mlp(store, compute, config, footprint));
  STRATA_RETURN_IF_ERROR(mlp->CreateTensors());
  STRATA_RETURN_IF_ERROR(mlp->InitWeights());
  return mlp;
}

absl::StatusOr<TensorId> Mlp::CreateTensor(std::string name, TensorKind kind,
                                           DType dtype,
                                           std::vector<int64_t> shape) {
  uint64_t bytes = DTypeSize(dtype);
  for (int64_t d : shape) bytes *= d;
  absl::StatusOr<TensorId> id = store_->Create({.name = std::move(name),
                                                .size_bytes = bytes,
                                                .dtype = dtype,
                                                .shape = std::move(shape),
                                                .kind = kind,
                                                .home = config_.home});
  if (id.ok()) created_.push_back(*id);
  return id;
}

absl::StatusOr<Mlp::Layer> Mlp::CreateLayer(size_t l, int64_t in, int64_t out,
                                            bool hidden) {
  const DType f32 = DType::kFloat32;
  const int64_t batch = config_.batch;
  Layer L;
  L.in = in;
  L.out = out;
  L.hidden = hidden;
  const std::string p = absl::StrFormat("layer%d.", l);
  const std::vector<int64_t> wshape = {L.out, L.in}, bshape = {L.out};
  using K = TensorKind;
  auto make = [&](const char* name, K kind, std::vector<int64_t> shape) {
    return CreateTensor(p + name, kind, f32, std::move(shape));
  };
  STRATA_ASSIGN_OR_RETURN(L.w, make("weight", K::kParameter, wshape));
  STRATA_ASSIGN_OR_RETURN(L.b, make("bias", K::kParameter, bshape));
  STRATA_ASSIGN_OR_RETURN(L.gw, make("weight.grad", K::kGradient, wshape));
  STRATA_ASSIGN_OR_RETURN(L.gb, make("bias.grad", K::kGradient, bshape));
  STRATA_ASSIGN_OR_RETURN(L.mw,
                          make("weight.adam_m", K::kOptimizerState, wshape));
  STRATA_ASSIGN_OR_RETURN(L.vw,
                          make("weight.adam_v", K::kOptimizerState, wshape));
  STRATA_ASSIGN_OR_RETURN(L.mb,
                          make("bias.adam_m", K::kOptimizerState, bshape));
  STRATA_ASSIGN_OR_RETURN(L.vb,
                          make("bias.adam_v", K::kOptimizerState, bshape));
  STRATA_ASSIGN_OR_RETURN(L.z, make(L.hidden ? "pre_activation" : "logits",
                                    K::kActivation, {batch, L.out}));
  if (L.hidden) {
    STRATA_ASSIGN_OR_RETURN(L.a,
                            make("activation", K::kActivation, {batch, L.out}));
  }
  return L;
}

absl::Status Mlp::CreateTensors() {
  const auto shapes = LayerShapes(config_);
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto [in, out] = shapes[l];
    STRATA_ASSIGN_OR_RETURN(Layer L,
                            CreateLayer(l, in, out, l + 1 < shapes.size()));
    layers_.push_back(L);
  }
  const DType f32 = DType::kFloat32;
  const int64_t batch = config_.batch;
  const int64_t widest = std::max(config_.width, config_.classes);
  using K = TensorKind;
  STRATA_ASSIGN_OR_RETURN(input_, CreateTensor("input", K::kActivation, f32,
                                               {batch, config_.inputs}));
  STRATA_ASSIGN_OR_RETURN(
      labels_, CreateTensor("labels", K::kActivation, DType::kInt32, {batch}));
  STRATA_ASSIGN_OR_RETURN(dlogits_,
                          CreateTensor("logits.grad", K::kActivation, f32,
                                       {batch, config_.classes}));
  for (int i = 0; i < 2; ++i) {
    STRATA_ASSIGN_OR_RETURN(
        dact_[i], CreateTensor(absl::StrFormat("activation.grad%d", i),
                               K::kActivation, f32, {batch, widest}));
  }
  return absl::OkStatus();
}

// He-uniform weights (He et al., 2015: bound sqrt(6 / fan_in), for ReLU-like
// units), LeCun-uniform for the output layer, zero biases.
absl::Status Mlp::InitWeights() {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const double bound =
        L.hidden ? std::sqrt(6.0 / L.in) : std::sqrt(3.0 / L.in);
    uint64_t state = config_.seed * 0x100000001b3ULL + l;
    std::vector<float> w(L.in * L.out);
    for (float& x : w) {
      // SplitMix64: fixed outputs on every platform, so the initial weights —
      // and with them every loss — depend only on the seed.
      const double u = (SplitMix64Next(state) >> 11) * 0x1.0p-53;  // [0, 1)
      x = static_cast<float>((2 * u - 1) * bound);
    }
    STRATA_RETURN_IF_ERROR(store_->Write(L.w, w.data(), w.size() * kF));
    const std::vector<float> zeros(L.out, 0.0f);
    STRATA_RETURN_IF_ERROR(store_->Write(L.b, zeros.data(), L.out * kF));
  }
  return absl::OkStatus();
}

absl::Status Mlp::UploadBatch(const float* images, const int32_t* labels,
                              int64_t rows) {
  if (rows < 1 || rows > config_.batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch of %d rows: must be 1..%d", rows, config_.batch));
  }
  STRATA_RETURN_IF_ERROR(
      store_->Write(input_, images, rows * config_.inputs * kF));
  return store_->Write(labels_, labels, rows * sizeof(int32_t));
}

absl::Status Mlp::Forward(int64_t rows) {
  TensorId x_id = input_;
  for (const Layer& L : layers_) {
    LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
    const int x = g.Add(x_id, Access::kRead), w = g.Add(L.w, Access::kRead),
              b = g.Add(L.b, Access::kRead), z = g.Add(L.z, Access::kOverwrite);
    const int a = L.hidden ? g.Add(L.a, Access::kOverwrite) : -1;
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(compute_->LinearForward(
        g.data(x), g.data(w), g.data(b), g.data(z), rows, L.in, L.out));
    if (L.hidden) {
      STRATA_RETURN_IF_ERROR(compute_->ActivationForward(
          config_.activation, g.data(z), g.data(a), rows * L.out));
      x_id = L.a;
    }
    STRATA_RETURN_IF_ERROR(g.Release());
  }
  return absl::OkStatus();
}

absl::StatusOr<LossResult> Mlp::Loss(int64_t rows, bool with_gradient) {
  LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
  const int logits = g.Add(layers_.back().z, Access::kRead);
  const int labels = g.Add(labels_, Access::kRead);
  const int dlogits = with_gradient ? g.Add(dlogits_, Access::kOverwrite) : -1;
  STRATA_RETURN_IF_ERROR(g.Acquire());
  absl::StatusOr<LossResult> result = compute_->SoftmaxCrossEntropy(
      g.data(logits), reinterpret_cast<const int32_t*>(g.data(labels)),
      with_gradient ? g.data(dlogits) : nullptr, rows, config_.classes);
  STRATA_RETURN_IF_ERROR(g.Release());
  return result;
}

absl::Status Mlp::Backward(int64_t rows, const AdamParams& adam) {
  TensorId dy_id = dlogits_;
  for (int l = layers() - 1; l >= 0; --l) {
    const Layer& L = layers_[l];
    const TensorId x_id = l > 0 ? layers_[l - 1].a : input_;
    const TensorId dx_id = dact_[l % 2];  // never dy_id: that is dact_[!(l%2)]
    {
      LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
      const int x = g.Add(x_id, Access::kRead), w = g.Add(L.w, Access::kRead),
                dy = g.Add(dy_id, Access::kRead),
                gw = g.Add(L.gw, Access::kOverwrite),
                gb = g.Add(L.gb, Access::kOverwrite);
      const int dx = l > 0 ? g.Add(dx_id, Access::kOverwrite) : -1;
      STRATA_RETURN_IF_ERROR(g.Acquire());
      STRATA_RETURN_IF_ERROR(compute_->LinearBackward(
          g.data(x), g.data(w), g.data(dy), g.data(gw), g.data(gb),
          l > 0 ? g.data(dx) : nullptr, rows, L.in, L.out));
      STRATA_RETURN_IF_ERROR(g.Release());
    }
    STRATA_RETURN_IF_ERROR(store_->Discard(dy_id));
    // The layer's gradients are complete: update it now, so that its
    // optimizer-state traffic (NVMe -> host loads, write-backs) overlaps the
    // backward pass of the layers below, as in ZeRO-Offload. Nothing below
    // reads this layer's weights, so the math is that of a separate step.
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.w, L.mw, L.vw, L.gw));
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.b, L.mb, L.vb, L.gb));
    if (l == 0) return store_->Discard(input_);
    // dx is the gradient of the previous layer's activation; through the
    // activation it becomes that layer's dy.
    const Layer& prev = layers_[l - 1];
    LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
    const int z = g.Add(prev.z, Access::kRead);
    const int dx = g.Add(dx_id, Access::kWrite);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(
        compute_->ActivationBackward(config_.activation, g.data(z), g.data(dx),
                                     g.data(dx), rows * prev.out));
    STRATA_RETURN_IF_ERROR(g.Release());
    STRATA_RETURN_IF_ERROR(store_->Discard(prev.z));
    STRATA_RETURN_IF_ERROR(store_->Discard(x_id));
    dy_id = dx_id;
  }
  return absl::OkStatus();
}

absl::Status Mlp::AdamOn(const AdamParams& p, TensorId w_id, TensorId m_id,
                         TensorId v_id, TensorId g_id) {
  const Tier T = config_.optimizer_tier;
  const bool on_device = T == Tier::kDevice;
  LeaseGroup group(store_, T, on_device ? compute_->stream() : nullptr,
                   &created_);
  const int g = group.Add(g_id, Access::kRead),
            w = group.Add(w_id, Access::kWrite),
            m = group.Add(m_id, Access::kWrite),
            v = group.Add(v_id, Access::kWrite);
  STRATA_RETURN_IF_ERROR(group.Acquire());
  const int64_t n = static_cast<int64_t>(group.bytes(w) / kF);
  const auto start = std::chrono::steady_clock::now();
  if (on_device) {
    STRATA_RETURN_IF_ERROR(compute_->Adam(p, group.data(w), group.data(m),
                                          group.data(v), group.data(g), n));
  } else {
    AdamUpdateCpu(p, group.data(w), group.data(m), group.data(v), group.data(g),
                  n);
  }
  optimizer_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  STRATA_RETURN_IF_ERROR(group.Release());
  return store_->Discard(g_id);  // the gradient is dead until next backward
}

AdamParams Mlp::StepAdamParams() const {
  AdamParams p = config_.adam;
  p.lr = lr_;
  const double t = static_cast<double>(steps_ + 1);
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  return p;
}

absl::Status Mlp::DiscardActivations() {
  for (const Layer& L : layers_) {
    STRATA_RETURN_IF_ERROR(store_->Discard(L.z));
    if (L.hidden) STRATA_RETURN_IF_ERROR(store_->Discard(L.a));
  }
  STRATA_RETURN_IF_ERROR(store_->Discard(input_));
  return store_->Discard(labels_);
}

absl::StatusOr<LossResult> Mlp::TrainStep(const float* images,
                                          const int32_t* labels, int64_t rows) {
  store_->BeginStep();
  absl::StatusOr<LossResult> result = [&]() -> absl::StatusOr<LossResult> {
    STRATA_RETURN_IF_ERROR(UploadBatch(images, labels, rows));
    STRATA_RETURN_IF_ERROR(Forward(rows));
    STRATA_ASSIGN_OR_RETURN(LossResult loss, Loss(rows, true));
    STRATA_RETURN_IF_ERROR(store_->Discard(layers_.back().z));
    STRATA_RETURN_IF_ERROR(store_->Discard(labels_));
    STRATA_RETURN_IF_ERROR(Backward(rows, StepAdamParams()));
    STRATA_RETURN_IF_ERROR(compute_->Synchronize());
    return loss;
  }();
  store_->EndStep();
  if (result.ok()) ++steps_;
  return result;
}

absl::StatusOr<LossResult> Mlp::Evaluate(const float* images,
                                         const int32_t* labels, int64_t rows) {
  store_->BeginStep();
  absl::StatusOr<LossResult> result = [&]() -> absl::StatusOr<LossResult> {
    STRATA_RETURN_IF_ERROR(UploadBatch(images, labels, rows));
    STRATA_RETURN_IF_ERROR(Forward(rows));
    STRATA_ASSIGN_OR_RETURN(LossResult loss, Loss(rows, false));
    STRATA_RETURN_IF_ERROR(DiscardActivations());
    return loss;
  }();
  store_->EndStep();
  return result;
}

std::vector<TensorId> Mlp::StateTensors() const {
  std::vector<TensorId> ids;
  for (const Layer& L : layers_) {
    ids.insert(ids.end(), {L.w, L.b, L.mw, L.vw, L.mb, L.vb});
  }
  return ids;
}

absl::Status Mlp::ReadWeights(int layer, std::vector<float>* out) {
  if (layer < 0 || layer >= layers()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layer %d: the model has %d", layer, layers()));
  }
  const Layer& L = layers_[layer];
  out->resize(L.in * L.out);
  return store_->Read(L.w, out->data(), out->size() * kF);
}

}  // namespace strata::train
