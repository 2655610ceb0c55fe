// mlp_tensors.cc: the Mlp's store tensors (see model.h): creating each
// layer's weights, gradients, Adam moments and per-micro-batch activations,
// initialising the weights, and reading, snapshotting and restoring them.
#include <algorithm>
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
#include "train/model/model.h"
#include "train/model/model_sharding.h"

namespace strata::train {

namespace {

constexpr uint64_t kF = sizeof(float);

// "layer0.activation", with ".mb<k>" when a step has several micro-batches.
std::string MicroName(std::string base, int k, int micro_batches) {
  if (micro_batches > 1) absl::StrAppend(&base, ".mb", k);
  return base;
}

}  // namespace

absl::StatusOr<TensorId> Mlp::CreateTensor(std::string name, TensorKind kind,
                                           DType dtype,
                                           std::vector<int64_t> shape,
                                           std::optional<Tier> home) {
  uint64_t bytes = DTypeSize(dtype);
  for (int64_t d : shape) bytes *= d;
  absl::StatusOr<TensorId> id =
      store_->Create({.name = std::move(name),
                      .size_bytes = bytes,
                      .dtype = dtype,
                      .shape = std::move(shape),
                      .kind = kind,
                      .home = home.value_or(config_.home)});
  if (id.ok()) created_.push_back(*id);
  return id;
}

absl::StatusOr<Mlp::Layer> Mlp::CreateLayer(size_t l, int64_t in, int64_t out,
                                            bool hidden) {
  const int64_t batch = config_.batch;
  const int micro = config_.accumulate;
  Layer L;
  L.in = in;
  L.out = out;
  L.hidden = hidden;
  const std::string p = absl::StrFormat("layer%d.", l);
  // Sharded: this rank's shard of each parameter, flat.
  const std::vector<int64_t> wshape =
      sharded() ? std::vector<int64_t>{Shard(L.out * L.in).second}
                : std::vector<int64_t>{L.out, L.in};
  const std::vector<int64_t> bshape = {sharded() ? Shard(L.out).second : L.out};
  using K = TensorKind;
  auto make = [&](const std::string& name, K kind, std::vector<int64_t> shape,
                  DType dtype = DType::kFloat32) {
    return CreateTensor(p + name, kind, dtype, std::move(shape));
  };
  const DType param = ParameterDType(config_.precision);
  STRATA_ASSIGN_OR_RETURN(L.w, make("weight", K::kParameter, wshape, param));
  STRATA_ASSIGN_OR_RETURN(L.b, make("bias", K::kParameter, bshape, param));
  // Mixed: the fp32 sums backward accumulates into, then the 16-bit
  // gradients cast from them and the fp32 master weights.
  const char* grad32 = mixed() ? "grad_accum" : "grad";
  STRATA_ASSIGN_OR_RETURN(
      L.gw, make(absl::StrCat("weight.", grad32), K::kGradient, wshape));
  STRATA_ASSIGN_OR_RETURN(
      L.gb, make(absl::StrCat("bias.", grad32), K::kGradient, bshape));
  if (mixed()) {
    STRATA_ASSIGN_OR_RETURN(L.gw16,
                            make("weight.grad", K::kGradient, wshape, param));
    STRATA_ASSIGN_OR_RETURN(L.gb16,
                            make("bias.grad", K::kGradient, bshape, param));
  }
  STRATA_ASSIGN_OR_RETURN(L.sw, CreateOptimizerState(p + "weight", wshape));
  STRATA_ASSIGN_OR_RETURN(L.sb, CreateOptimizerState(p + "bias", bshape));
  if (sharded()) {
    L.sw.first_index = Shard(L.out * L.in).first;
    L.sb.first_index = Shard(L.out).first;
  }
  // Under checkpointing a hidden layer's pre-activation lives only while
  // backward recomputes and uses it, one micro-batch at a time.
  const int zs = L.hidden && !KeepsPreActivation() ? 1 : micro;
  for (int k = 0; k < zs; ++k) {
    STRATA_ASSIGN_OR_RETURN(
        TensorId z,
        make(MicroName(L.hidden ? "pre_activation" : "logits", k, zs),
             K::kActivation, {batch, L.out}));
    L.z.push_back(z);
  }
  for (int k = 0; L.hidden && k < micro; ++k) {
    STRATA_ASSIGN_OR_RETURN(TensorId a, make(MicroName("activation", k, micro),
                                             K::kActivation, {batch, L.out}));
    L.a.push_back(a);
  }
  return L;
}

absl::StatusOr<Mlp::MicroBatch> Mlp::CreateMicroBatch(int k) {
  const DType f32 = DType::kFloat32;
  const int64_t batch = config_.batch;
  const int64_t widest = std::max(config_.width, config_.classes);
  const int micro = config_.accumulate;
  auto name = [&](const std::string& base) {
    return MicroName(base, k, micro);
  };
  using K = TensorKind;
  MicroBatch m;
  STRATA_ASSIGN_OR_RETURN(m.input, CreateTensor(name("input"), K::kActivation,
                                                f32, {batch, config_.inputs}));
  STRATA_ASSIGN_OR_RETURN(m.labels, CreateTensor(name("labels"), K::kActivation,
                                                 DType::kInt32, {batch}));
  STRATA_ASSIGN_OR_RETURN(m.dlogits,
                          CreateTensor(name("logits.grad"), K::kActivation, f32,
                                       {batch, config_.classes}));
  for (int i = 0; i < 2; ++i) {
    STRATA_ASSIGN_OR_RETURN(
        m.dact[i], CreateTensor(name(absl::StrFormat("activation.grad%d", i)),
                                K::kActivation, f32, {batch, widest}));
  }
  return m;
}

absl::Status Mlp::CreateTensors() {
  const auto shapes = LayerShapes(config_);
  for (size_t l = 0; l < shapes.size(); ++l) {
    const auto [in, out] = shapes[l];
    STRATA_ASSIGN_OR_RETURN(Layer L,
                            CreateLayer(l, in, out, l + 1 < shapes.size()));
    layers_.push_back(std::move(L));
  }
  for (int k = 0; k < config_.accumulate; ++k) {
    STRATA_ASSIGN_OR_RETURN(MicroBatch m, CreateMicroBatch(k));
    micro_.push_back(m);
  }
  if (sharded()) return CreateSlots();
  if (!stream_optimizer_) return absl::OkStatus();
  int64_t part = 0;
  for (const Layer& L : layers_) part = std::max(part, L.sw.parts[0].count);
  // The device-side gradient and weight: fp32, or the 16-bit copies.
  const DType dtype =
      mixed() ? ParameterDType(config_.precision) : DType::kFloat32;
  // Homed on the host, where they are only ever leased: they take no NVMe
  // space and their host space is reserved, part of the streamed working set.
  using K = TensorKind;
  STRATA_ASSIGN_OR_RETURN(
      stage_g_, CreateTensor("optimizer.stage.grad", K::kGradient, dtype,
                             {part}, Tier::kHost));
  STRATA_ASSIGN_OR_RETURN(
      stage_w_, CreateTensor("optimizer.stage.weight", K::kParameter, dtype,
                             {part}, Tier::kHost));
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
    const std::vector<float> zeros(L.out, 0.0f);
    if (sharded()) {  // this rank's slice of the same weights
      const auto [first, count] = Shard(L.in * L.out);
      w.erase(w.begin(), w.begin() + first);
      w.resize(count);
    }
    const int64_t out = sharded() ? Shard(L.out).second : L.out;
    if (!mixed()) {
      STRATA_RETURN_IF_ERROR(store_->Write(L.w, w.data(), w.size() * kF));
      STRATA_RETURN_IF_ERROR(store_->Write(L.b, zeros.data(), out * kF));
      continue;
    }
    // The master weights are the fp32 values; the parameters their 16-bit
    // rounding to nearest (every later rounding is the optimizer's).
    for (size_t k = 0; k < L.sw.parts.size(); ++k) {
      const OptimizerPart& part = L.sw.parts[k];
      STRATA_RETURN_IF_ERROR(store_->Write(
          L.sw.master[k], w.data() + part.first, part.count * kF));
    }
    STRATA_RETURN_IF_ERROR(
        store_->Write(L.sb.master[0], zeros.data(), out * kF));
    std::vector<uint16_t> half(w.size());
    CastToHalfCpu(config_.precision, {}, w.data(), half.data(), w.size());
    STRATA_RETURN_IF_ERROR(
        store_->Write(L.w, half.data(), half.size() * sizeof(uint16_t)));
    CastToHalfCpu(config_.precision, {}, zeros.data(), half.data(), out);
    STRATA_RETURN_IF_ERROR(
        store_->Write(L.b, half.data(), out * sizeof(uint16_t)));
  }
  return absl::OkStatus();
}

int64_t Mlp::parameters() const {
  int64_t n = 0;
  for (const Layer& L : layers_) n += L.out * L.in + L.out;
  return n;
}

std::vector<TensorId> Mlp::StateTensors() const {
  std::vector<TensorId> ids;
  for (const Layer& L : layers_) {
    ids.insert(ids.end(), {L.w, L.b});
    for (const std::vector<TensorId>* parts :
         {&L.sw.m, &L.sw.v, &L.sb.m, &L.sb.v, &L.sw.master, &L.sb.master}) {
      ids.insert(ids.end(), parts->begin(), parts->end());
    }
  }
  return ids;
}

Mlp::Snapshot Mlp::snapshot() const {
  Snapshot s{.steps = steps_, .skipped_steps = skipped_steps_};
  if (loss_scale_) s.loss_scale = loss_scale_->state();
  return s;
}

absl::Status Mlp::Restore(const Snapshot& s) {
  if (s.steps < 0 || s.skipped_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d steps, %d skipped: counts must be >= 0", s.steps, s.skipped_steps));
  }
  if (loss_scale_) STRATA_RETURN_IF_ERROR(loss_scale_->Restore(s.loss_scale));
  steps_ = s.steps;
  skipped_steps_ = s.skipped_steps;
  return absl::OkStatus();
}

absl::Status Mlp::ReadWeights(int layer, std::vector<float>* out) {
  if (layer < 0 || layer >= layers()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layer %d: the model has %d", layer, layers()));
  }
  const Layer& L = layers_[layer];
  out->resize(L.in * L.out);
  if (sharded()) return GatherWeights(layer, out);
  if (!mixed()) return store_->Read(L.w, out->data(), out->size() * kF);
  for (size_t k = 0; k < L.sw.parts.size(); ++k) {
    const OptimizerPart& part = L.sw.parts[k];
    STRATA_RETURN_IF_ERROR(store_->Read(
        L.sw.master[k], out->data() + part.first, part.count * kF));
  }
  return absl::OkStatus();
}

}  // namespace strata::train
