// model.cc: Mlp's tensors, initialisation and training step (see model.h).
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

namespace {

// "layer0.activation", with ".mb<k>" when a step has several micro-batches.
std::string MicroName(std::string base, int k, int micro_batches) {
  if (micro_batches > 1) absl::StrAppend(&base, ".mb", k);
  return base;
}

}  // namespace

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

absl::Status Mlp::Backward(const AdamParams& adam) {
  for (int l = layers() - 1; l >= 0; --l) {
    const Layer& L = layers_[l];
    // Micro-batch k's gradient at this layer's output: the loss's for the
    // last layer, else what the layer above wrote.
    auto dy = [&](int k) {
      return l + 1 == layers() ? micro_[k].dlogits
                               : micro_[k].dact[(l + 1) % 2];
    };
    if (sharded()) {
      STRATA_RETURN_IF_ERROR(EnsureGathered(l));
      if (l > 0) STRATA_RETURN_IF_ERROR(StartGather(l - 1));
      STRATA_RETURN_IF_ERROR(ReceivePartialGradients(l));
    }
    for (int k = 0; k < used_; ++k) {
      if (L.hidden) STRATA_RETURN_IF_ERROR(ActivationBackward(l, k, dy(k)));
      STRATA_RETURN_IF_ERROR(LinearBackward(l, k, dy(k), Accumulates(k)));
    }
    if (sharded()) {
      // The layer above's shards arrive while this one's gradients travel;
      // its update overlaps the chain of the layers below.
      STRATA_RETURN_IF_ERROR(PassGradients(l));
      if (l + 1 < layers()) STRATA_RETURN_IF_ERROR(UpdateShard(l + 1, adam));
      if (l == 0) STRATA_RETURN_IF_ERROR(UpdateShard(0, adam));
      continue;
    }
    if (mixed()) continue;  // updated by FinishMixedStep, or skipped
    // The layer's gradients are complete: update it now, so that its
    // optimizer-state traffic (NVMe -> host loads, write-backs) overlaps the
    // backward pass of the layers below, as in ZeRO-Offload. Nothing below
    // reads this layer's weights, so the math is that of a separate step.
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.sw, L.gw, L.w, 0));
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.sb, L.gb, L.b, 0));
  }
  return mixed() ? FinishMixedStep(adam) : absl::OkStatus();
}

absl::Status Mlp::CastGradients(const Layer& L, const LeaseGroup& g, int gw,
                                int gb, int gw16, int gb16) {
  const Precision type = config_.precision;
  STRATA_RETURN_IF_ERROR(
      compute_->CastToHalf(type, {}, g.data(gw), g.half(gw16), L.out * L.in));
  return compute_->CastToHalf(type, {}, g.data(gb), g.half(gb16), L.out);
}

absl::Status Mlp::FinishMixedStep(const AdamParams& adam) {
  // Every cast added its non-finite results to the count as the gradients
  // arrived; reading it is the only synchronisation. Sharded, the ranks
  // cast their shards now and agree on the sum, so all skip or none.
  STRATA_ASSIGN_OR_RETURN(int64_t nonfinite, compute_->TakeNonFinite());
  if (sharded()) {
    STRATA_ASSIGN_OR_RETURN(const int64_t shards, CastGradientShards());
    nonfinite += shards;
  }
  const int64_t step = steps_ + skipped_steps_;
  const bool apply =
      loss_scale_ ? loss_scale_->Update(step, nonfinite) : nonfinite == 0;
  if (!apply) {
    ++skipped_steps_;
    for (const Layer& L : layers_) {
      STRATA_RETURN_IF_ERROR(store_->Discard(L.gw16));
      STRATA_RETURN_IF_ERROR(store_->Discard(L.gb16));
    }
    return absl::OkStatus();
  }
  // In backward's order, as the fp32 updates run.
  for (int l = layers() - 1; l >= 0; --l) {
    const Layer& L = layers_[l];
    const uint64_t tensor = 2 * static_cast<uint64_t>(l);
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.sw, L.gw16, L.w, tensor));
    STRATA_RETURN_IF_ERROR(AdamOn(adam, L.sb, L.gb16, L.b, tensor + 1));
  }
  return absl::OkStatus();
}

absl::Status Mlp::ActivationBackward(int l, int k, TensorId dy_id) {
  const Layer& L = layers_[l];
  const int64_t rows = micro_[k].rows;
  const TensorId z_id = Z(L, k);
  LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
  const bool recompute = !KeepsPreActivation();
  const int x = recompute ? g.Add(LayerInput(l, k), Access::kRead) : -1;
  const auto [w, b] = recompute ? AddWeights(l, g) : std::pair{-1, -1};
  const int z = g.Add(z_id, recompute ? Access::kOverwrite : Access::kRead);
  const int dy = g.Add(dy_id, Access::kWrite);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  if (recompute) {
    // The forward pass's LinearForward on the same operands: the same bits.
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(LinearForwardOn(L, g.data(x), Weight(l, g, w, false),
                                           Weight(l, g, b, true), g.data(z),
                                           rows));
    recompute_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    Produced(z_id, rows * L.out * kF);
  }
  STRATA_RETURN_IF_ERROR(compute_->ActivationBackward(
      config_.activation, g.data(z), g.data(dy), g.data(dy), rows * L.out));
  STRATA_RETURN_IF_ERROR(g.Release());
  STRATA_RETURN_IF_ERROR(Drop(z_id));
  // The activation itself was only the next layer's input, dead by now.
  return Drop(L.a[k]);
}

absl::Status Mlp::LinearBackward(int l, int k, TensorId dy_id,
                                 bool accumulate) {
  const Layer& L = layers_[l];
  const int64_t rows = micro_[k].rows;
  const TensorId x_id = LayerInput(l, k);
  const TensorId dx_id = micro_[k].dact[l % 2];  // never dy: dact[(l+1) % 2]
  LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
  const Access grads = accumulate ? Access::kWrite : Access::kOverwrite;
  const int x = g.Add(x_id, Access::kRead);
  const auto [w, b] = AddWeights(l, g);
  const int dy = g.Add(dy_id, Access::kRead);
  // Sharded: the full gradients are the slot's (the chain's running sum).
  const int gw = sharded() ? -1 : g.Add(L.gw, grads);
  const int gb = sharded() ? -1 : g.Add(L.gb, grads);
  const int dx = l > 0 ? g.Add(dx_id, Access::kOverwrite) : -1;
  // Mixed: the last micro-batch casts the completed sums to 16 bits in the
  // same leases, so the fp32 sums never leave the device.
  // Sharded: each rank casts its shard of the chain's total (UpdateShard).
  const bool cast = mixed() && !sharded() && k + 1 == used_;
  const int gw16 = cast ? g.Add(L.gw16, Access::kOverwrite) : -1;
  const int gb16 = cast ? g.Add(L.gb16, Access::kOverwrite) : -1;
  STRATA_RETURN_IF_ERROR(g.Acquire());
  float* const dx_data = l > 0 ? g.data(dx) : nullptr;
  const float* const w_data = Weight(l, g, w, false);
  (void)b;  // backward reads no bias
  float* const gw_data = gw >= 0 ? g.data(gw) : SlotData(l % 2, kSlotGw);
  float* const gb_data = gb >= 0 ? g.data(gb) : SlotData(l % 2, kSlotGb);
  if (mixed()) {
    STRATA_RETURN_IF_ERROR(compute_->LinearBackward16(
        config_.precision, g.data(x), reinterpret_cast<const uint16_t*>(w_data),
        g.data(dy), gw_data, gb_data, dx_data, rows, L.in, L.out, accumulate));
  } else {
    STRATA_RETURN_IF_ERROR(compute_->LinearBackward(
        g.data(x), w_data, g.data(dy), gw_data, gb_data, dx_data, rows, L.in,
        L.out, accumulate));
  }
  if (cast) STRATA_RETURN_IF_ERROR(CastGradients(L, g, gw, gb, gw16, gb16));
  STRATA_RETURN_IF_ERROR(g.Release());
  if (cast) {
    STRATA_RETURN_IF_ERROR(store_->Discard(L.gw));
    STRATA_RETURN_IF_ERROR(store_->Discard(L.gb));
  }
  if (l > 0) Produced(dx_id, rows * L.in * kF);
  STRATA_RETURN_IF_ERROR(Drop(dy_id));
  // The first layer's input is read by nothing else; a hidden layer's input
  // (the layer below's activation) is dropped with that layer's z.
  return l == 0 ? Drop(x_id) : absl::OkStatus();
}

absl::Status Mlp::Drop(TensorId id) {
  activations_.Dropped(id);
  return store_->Discard(id);
}

AdamParams Mlp::StepAdamParams() const {
  AdamParams p = config_.adam;
  p.lr = lr_;
  const double t = static_cast<double>(steps_ + 1);
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  return p;
}

// The micro-batches the pass used, only: an evaluation batch touches one,
// however many a training step has.
absl::Status Mlp::DiscardActivations() {
  for (int k = 0; k < used_; ++k) {
    for (const Layer& L : layers_) {
      STRATA_RETURN_IF_ERROR(Drop(Z(L, k)));
      if (L.hidden) STRATA_RETURN_IF_ERROR(Drop(L.a[k]));
    }
    const MicroBatch& m = micro_[k];
    for (TensorId id : {m.input, m.labels, m.dlogits, m.dact[0], m.dact[1]}) {
      STRATA_RETURN_IF_ERROR(Drop(id));
    }
  }
  return absl::OkStatus();
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
