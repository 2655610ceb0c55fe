// gpt_tensors.cc: Gpt's tensors — one per block and role — and GPT-2's
// initialisation (see gpt.h).
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "strata/status.h"
#include "train/compute/cpu/half_cast.h"
#include "train/model/gpt.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);
constexpr double kInitStddev = 0.02;  // GPT-2's

uint64_t Elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Gpt::Gpt(Store* store, Compute* compute, const GptConfig& config,
         const ModelFootprint& footprint, Collectives* collectives)
    : store_(store),
      compute_(compute),
      config_(config),
      footprint_(footprint),
      collectives_(collectives),
      optimizer_(
          store, compute, config.optimizer_tier,
          {.max_norm = config.grad_clip, .weight_decay = config.weight_decay},
          &created_),
      lr_(config.adam.lr) {}

Gpt::~Gpt() {
  for (TensorId id : created_) store_->Destroy(id).IgnoreError();
}

absl::StatusOr<std::unique_ptr<Gpt>> Gpt::Create(Store* store, Compute* compute,
                                                 GptConfig config,
                                                 Collectives* collectives) {
  const Stats stats = store->GetStats();
  if (config.classifier_rows <= 0) {
    config.classifier_rows = ChooseClassifierRows(
        config, stats.tiers[int(Tier::kDevice)].capacity_bytes);
  }
  const int ranks = collectives ? collectives->size() : 0;
  if (collectives) {
    STRATA_RETURN_IF_ERROR(
        CheckGptShardable(config, *compute, *collectives, stats.device_memory));
    collectives->OrderAfter(compute->stream());  // a GPU transport's order
  }
  STRATA_ASSIGN_OR_RETURN(ModelFootprint footprint,
                          ComputeGptFootprint(config, ranks));
  STRATA_RETURN_IF_ERROR(CheckGptFits(stats, config, footprint));
  std::unique_ptr<Gpt> gpt(
      new Gpt(store, compute, config, footprint, collectives));
  if (config.precision == Precision::kFp16) {
    STRATA_ASSIGN_OR_RETURN(DynamicLossScale scale,
                            DynamicLossScale::Create(config.loss_scale));
    gpt->loss_scale_ = std::move(scale);
  }
  STRATA_RETURN_IF_ERROR(gpt->CreateTensors());
  STRATA_RETURN_IF_ERROR(gpt->InitWeights());
  return gpt;
}

absl::StatusOr<TensorId> Gpt::CreateTensor(const std::string& name,
                                           TensorKind kind, DType dtype,
                                           std::vector<int64_t> shape,
                                           std::optional<Tier> home) {
  const uint64_t bytes = DTypeSize(dtype) * Elements(shape);
  absl::StatusOr<TensorId> id =
      store_->Create({.name = name,
                      .size_bytes = bytes,
                      .dtype = dtype,
                      .shape = std::move(shape),
                      .kind = kind,
                      .home = home.value_or(config_.home)});
  if (!id.ok()) return id;
  created_.push_back(*id);
  if (kind == TensorKind::kActivation) activations_.Track(*id, bytes);
  return id;
}

absl::StatusOr<ParamSlot> Gpt::CreateParam(const std::string& name,
                                           std::vector<int64_t> shape,
                                           bool decay, bool half) {
  const DType f32 = DType::kFloat32;
  using K = TensorKind;
  ParamSlot s;
  s.decay = decay;
  const int64_t elements = static_cast<int64_t>(Elements(shape));
  const std::vector<int64_t> whole = shape;
  if (sharded()) {  // this rank's shard, flat
    const auto [first, count] = Shard(elements);
    s.first_index = first;
    shape = {count};
  }
  s.bytes = Elements(shape) * kF;
  s.tensor = params_.size();
  if (half && mixed()) {
    // The 16-bit copies carry the names; the fp32 ones are the optimizer's.
    s.type = config_.precision;
    const DType h = ParameterDType(s.type);
    STRATA_ASSIGN_OR_RETURN(s.w16, CreateTensor(name, K::kParameter, h, shape));
    STRATA_ASSIGN_OR_RETURN(
        s.w, CreateTensor(name + ".master", K::kOptimizerState, f32, shape));
    STRATA_ASSIGN_OR_RETURN(
        s.g, CreateTensor(name + ".grad_accum", K::kGradient, f32, shape));
    STRATA_ASSIGN_OR_RETURN(
        s.g16, CreateTensor(name + ".grad", K::kGradient, h, shape));
  } else {
    STRATA_ASSIGN_OR_RETURN(s.w, CreateTensor(name, K::kParameter, f32, shape));
    STRATA_ASSIGN_OR_RETURN(
        s.g, CreateTensor(name + ".grad", K::kGradient, f32, shape));
  }
  STRATA_ASSIGN_OR_RETURN(
      s.m, CreateTensor(name + ".adam_m", K::kOptimizerState, f32, shape));
  STRATA_ASSIGN_OR_RETURN(
      s.v, CreateTensor(name + ".adam_v", K::kOptimizerState, f32, shape));
  params_.push_back({name, s, elements, whole});
  return s;
}

absl::StatusOr<TensorId> Gpt::CreateBackup(const std::string& prefix,
                                           const ParamGroup& group) {
  return CreateTensor(prefix + "rollback_backup", TensorKind::kOptimizerState,
                      DType::kFloat32,
                      {static_cast<int64_t>(group.backup_bytes() / kF)});
}

absl::StatusOr<Gpt::Block> Gpt::CreateBlock(int l) {
  const int64_t C = config_.embed;
  const std::string p = absl::StrFormat("block%d.", l);
  Block b;
  // Role order matches Block's enum.
  // LayerNorms stay fp32 under mixed precision (half false).
  const struct {
    const char* name;
    std::vector<int64_t> shape;
    bool decay, half;
  } roles[Block::kCount] = {
      {"ln1.weight", {C}, false, false},
      {"ln1.bias", {C}, false, false},
      {"qkv.weight", {3 * C, C}, true, true},
      {"qkv.bias", {3 * C}, false, true},
      {"proj.weight", {C, C}, true, true},
      {"proj.bias", {C}, false, true},
      {"ln2.weight", {C}, false, false},
      {"ln2.bias", {C}, false, false},
      {"fc.weight", {4 * C, C}, true, true},
      {"fc.bias", {4 * C}, false, true},
      {"fc_proj.weight", {C, 4 * C}, true, true},
      {"fc_proj.bias", {C}, false, true},
  };
  for (const auto& r : roles) {
    STRATA_ASSIGN_OR_RETURN(ParamSlot s,
                            CreateParam(p + r.name, r.shape, r.decay, r.half));
    b.group.params.push_back(s);
  }
  STRATA_ASSIGN_OR_RETURN(b.group.backup, CreateBackup(p, b.group));
  for (int k = 0; k < config_.accumulate; ++k) {
    STRATA_ASSIGN_OR_RETURN(Acts a, CreateActs(p, MicroSuffix(k)));
    b.micro.push_back(a);
  }
  return b;
}

std::string Gpt::MicroSuffix(int k) const {
  return config_.accumulate > 1 ? absl::StrFormat(".mb%d", k) : "";
}

absl::StatusOr<Gpt::Acts> Gpt::CreateActs(const std::string& p,
                                          const std::string& suffix) {
  const int64_t C = config_.embed, N = config_.tokens();
  auto act = [&](const char* name, std::vector<int64_t> shape) {
    return CreateTensor(p + name + suffix, TensorKind::kActivation,
                        DType::kFloat32, std::move(shape));
  };
  Acts a;
  STRATA_ASSIGN_OR_RETURN(a.x, act("input", {N, C}));
  STRATA_ASSIGN_OR_RETURN(a.ln1, act("ln1.out", {N, C}));
  STRATA_ASSIGN_OR_RETURN(a.ln1_stats, act("ln1.stats", {2, N}));
  STRATA_ASSIGN_OR_RETURN(a.qkv, act("qkv.out", {N, 3 * C}));
  STRATA_ASSIGN_OR_RETURN(a.att, act("attention.out", {N, C}));
  STRATA_ASSIGN_OR_RETURN(
      a.lse,
      act("attention.lse", {config_.batch, config_.heads, config_.context}));
  STRATA_ASSIGN_OR_RETURN(a.mid, act("residual.mid", {N, C}));
  STRATA_ASSIGN_OR_RETURN(a.ln2, act("ln2.out", {N, C}));
  STRATA_ASSIGN_OR_RETURN(a.ln2_stats, act("ln2.stats", {2, N}));
  STRATA_ASSIGN_OR_RETURN(a.fc, act("fc.out", {N, 4 * C}));
  STRATA_ASSIGN_OR_RETURN(a.gelu, act("gelu.out", {N, 4 * C}));
  return a;
}

absl::StatusOr<Gpt::MicroIo> Gpt::CreateMicroIo(const std::string& suffix) {
  const int64_t C = config_.embed, N = config_.tokens();
  auto act = [&](const char* name, std::vector<int64_t> shape,
                 DType dtype = DType::kFloat32) {
    return CreateTensor(name + suffix, TensorKind::kActivation, dtype,
                        std::move(shape));
  };
  MicroIo io;
  STRATA_ASSIGN_OR_RETURN(io.tokens, act("tokens", {N}, DType::kInt32));
  STRATA_ASSIGN_OR_RETURN(io.targets, act("targets", {N}, DType::kInt32));
  STRATA_ASSIGN_OR_RETURN(io.out, act("blocks.out", {N, C}));
  STRATA_ASSIGN_OR_RETURN(io.lnf_out, act("lnf.out", {N, C}));
  STRATA_ASSIGN_OR_RETURN(io.lnf_stats, act("lnf.stats", {2, N}));
  STRATA_ASSIGN_OR_RETURN(io.dres, act("residual.grad", {N, C}));
  STRATA_ASSIGN_OR_RETURN(io.dln, act("ln.out.grad", {N, C}));
  STRATA_ASSIGN_OR_RETURN(io.dqkv, act("qkv.out.grad", {N, 3 * C}));
  return io;
}

absl::Status Gpt::CreateTensors() {
  const int64_t C = config_.embed, N = config_.tokens();
  const int64_t V = config_.vocab, T = config_.context;
  // Creation order is the order of first use in a step: embeddings, blocks,
  // final LayerNorm.
  STRATA_ASSIGN_OR_RETURN(ParamSlot wte, CreateParam("wte", {V, C}, true));
  STRATA_ASSIGN_OR_RETURN(ParamSlot wpe, CreateParam("wpe", {T, C}, true));
  // The embeddings' gradients complete last, when the norm is known: they
  // are never updated speculatively and need no backup.
  g_.embeddings.params = {wte, wpe};
  blocks_.reserve(config_.layers);
  for (int l = 0; l < config_.layers; ++l) {
    STRATA_ASSIGN_OR_RETURN(Block b, CreateBlock(l));
    blocks_.push_back(std::move(b));
  }
  STRATA_ASSIGN_OR_RETURN(ParamSlot lw,
                          CreateParam("lnf.weight", {C}, false, false));
  STRATA_ASSIGN_OR_RETURN(ParamSlot lb,
                          CreateParam("lnf.bias", {C}, false, false));
  g_.lnf.params = {lw, lb};
  STRATA_ASSIGN_OR_RETURN(g_.lnf.backup, CreateBackup("lnf.", g_.lnf));
  for (int k = 0; k < config_.accumulate; ++k) {
    STRATA_ASSIGN_OR_RETURN(MicroIo io, CreateMicroIo(MicroSuffix(k)));
    io_.push_back(io);
  }
  using K = TensorKind;
  auto act = [&](const char* name, std::vector<int64_t> shape) {
    return CreateTensor(name, K::kActivation, DType::kFloat32,
                        std::move(shape));
  };
  STRATA_ASSIGN_OR_RETURN(s_.logits,
                          act("logits.slice", {config_.classifier_rows, V}));
  STRATA_ASSIGN_OR_RETURN(s_.datt, act("attention.out.grad", {N, C}));
  STRATA_ASSIGN_OR_RETURN(s_.dfc, act("fc.out.grad", {N, 4 * C}));
  if (sharded()) return CreateSlots();
  cg_ = g_;
  for (Block& b : blocks_) b.compute = &b.group;
  return absl::OkStatus();
}

// Normal(0, stddev) from SplitMix64 through Box-Muller: the same values on
// every platform, so the initial weights depend only on the seed. stddev 0
// fills with `fill` (biases 0, LayerNorm weights 1). Moments start at 0.
absl::Status Gpt::InitParam(const Param& p, double stddev, double fill,
                            uint64_t stream) {
  const ParamSlot& slot = p.slot;
  // The whole tensor's values, of which a shard keeps its part: the same
  // weights however many ranks share them.
  std::vector<float> w(p.elements, static_cast<float>(fill));
  if (stddev > 0) {
    uint64_t state = config_.seed * 0x9e3779b97f4a7c15ULL + stream;
    for (size_t i = 0; i < w.size(); i += 2) {
      const double u1 = ((SplitMix64Next(state) >> 11) + 1) * 0x1.0p-53;
      const double u2 = (SplitMix64Next(state) >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1)) * stddev;
      w[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
      if (i + 1 < w.size()) {
        w[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
      }
    }
  }
  if (sharded()) {
    w.erase(w.begin(), w.begin() + slot.first_index);
    w.resize(slot.bytes / kF);
  }
  STRATA_RETURN_IF_ERROR(store_->Write(slot.w, w.data(), slot.bytes));
  if (slot.mixed()) {  // the master weight rounded to nearest
    std::vector<uint16_t> h(w.size());
    CastToHalfCpu(slot.type, {}, w.data(), h.data(), w.size());
    STRATA_RETURN_IF_ERROR(
        store_->Write(slot.w16, h.data(), h.size() * sizeof(uint16_t)));
  }
  const std::vector<float> zeros(w.size(), 0.0f);
  STRATA_RETURN_IF_ERROR(store_->Write(slot.m, zeros.data(), slot.bytes));
  return store_->Write(slot.v, zeros.data(), slot.bytes);
}

absl::Status Gpt::InitWeights() {
  // GPT-2: the residual projections scaled by 1/sqrt(2L).
  const double residual = kInitStddev / std::sqrt(2.0 * config_.layers);
  uint64_t stream = 0;
  for (const Param& p : params_) {
    const std::string& n = p.name;
    const bool bias = n.ends_with(".bias");
    const bool norm =
        n.find(".ln") != std::string::npos || n.starts_with("lnf.");
    const bool proj = n.ends_with("proj.weight");
    double stddev = kInitStddev, fill = 0;
    if (bias) stddev = 0;
    if (norm) stddev = 0, fill = bias ? 0 : 1;
    if (proj) stddev = residual;
    STRATA_RETURN_IF_ERROR(InitParam(p, stddev, fill, ++stream));
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Gpt::ParameterShapes()
    const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const Param& p : params_) out.emplace_back(p.name, p.shape);
  return out;
}

std::vector<TensorId> Gpt::StateTensors() const {
  std::vector<TensorId> ids;
  for (const Param& p : params_) {
    if (p.slot.mixed()) ids.push_back(p.slot.w16);
    ids.insert(ids.end(), {p.slot.w, p.slot.m, p.slot.v});
  }
  return ids;
}

absl::Status Gpt::RestoreState(const Snapshot& snapshot,
                               const ClippedAdamW::Snapshot& optimizer) {
  if (loss_scale_) {
    STRATA_RETURN_IF_ERROR(loss_scale_->Restore(snapshot.loss_scale));
  }
  steps_ = snapshot.steps;
  skipped_steps_ = snapshot.skipped_steps;
  rollback_seconds_ = snapshot.rollback_seconds;
  optimizer_.Restore(optimizer);
  return absl::OkStatus();
}

absl::Status Gpt::ReadParameter(const std::string& name,
                                std::vector<float>* out) {
  for (const Param& p : params_) {
    if (p.name != name) continue;
    if (sharded()) return GatherParameter(p, out);
    out->resize(p.slot.bytes / kF);
    return store_->Read(p.slot.w, out->data(), p.slot.bytes);
  }
  return absl::NotFoundError(absl::StrCat("no parameter named ", name));
}

}  // namespace strata::train
