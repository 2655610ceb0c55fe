// model_sharding.cc: the Mlp as one rank of a sharded data-parallel run
// (model.h's Create with Collectives; ZeRO-3, Rajbhandari et al., 2020).
//
// Per layer, every rank's store holds its shard of the weight and bias, of
// their gradients and of their Adam moments. The full parameters exist only
// in two device-home gather slots (layer l in slot l % 2), all-gathered from
// the shards before the layer computes, the next layer's gather started
// while this one computes (the prefetch ZeRO-3 does on its own stream).
//
// The gradient sum is a chain in rank order, not a library's reduction:
// rank 0 accumulates its micro-batches into the slot's gradient buffers,
// sends the sums to rank 1, which accumulates its own micro-batches onto them
// (LinearBackward with accumulate) and passes them on; the last rank holds
// the total and sends each rank its shard. Each float's additions happen in
// the order a single rank would do them over the same micro-batches, so the
// result is bit for bit the unsharded run's with ranks x accumulate
// micro-batches, for any batch. The price is a pipeline: rank r's layer
// starts when rank r - 1's is done, so a step takes about one layer's
// backward longer per extra rank, and the full gradient crosses every link
// of the chain once (ZeRO-3's ring reduce-scatter sends (N - 1) / N of it
// per rank, in an order of its own).
//
// Mixed precision (bf16, fp16): the shards and the slots' parameters are
// 16-bit, so gathers move half the bytes; the chain's sums stay fp32 (as the
// unsharded model's do across micro-batches). Each rank casts its fp32
// shard of the total to 16 bits, the ranks all-gather their non-finite
// counts so that all skip a step or none, and each updates its fp32 master
// shard, stochastic rounding seeded by the whole tensor's element index:
// the unsharded run's bits again.
#include "train/model/model_sharding.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/precision.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);

// Message tags: four per layer (the sums passed along the chain, the shards
// handed out), so a layer's messages never match another's.
enum TagKind { kPartialW, kPartialB, kShardW, kShardB, kTagKinds };
int Tag(int layer, TagKind kind) { return layer * kTagKinds + kind; }

}  // namespace

absl::Status CheckShardedDevice(const Compute& compute,
                                const Collectives& collectives,
                                const std::string& device_memory) {
  if (device_memory != "copies") {
    return absl::FailedPreconditionError(
        "--distributed gathers each layer into device memory of its own, "
        "which unified memory does not have: drop --memory=unified");
  }
  const bool gpu = compute.stream() != nullptr;
  if (gpu != (collectives.name() == "nccl")) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a sharded model on %s needs %s, not the %s transport: %s",
        gpu ? "a CUDA GPU" : "the CPU", gpu ? "NCCL" : "MPI or threads",
        collectives.name(),
        gpu ? "on a GPU the gathers move GPU memory over NCCL "
              "(MakeNcclCollectives; OpenTrainSetup and OpenGptSetup make it "
              "from MPI), or add --device=simulated"
            : "NCCL moves GPU memory only"));
  }
  return absl::OkStatus();
}

absl::Status CheckShardable(const ModelConfig& config, const Compute& compute,
                            const Collectives& collectives,
                            const std::string& device_memory) {
  STRATA_RETURN_IF_ERROR(
      CheckShardedDevice(compute, collectives, device_memory));
  const int64_t narrowest = std::min(config.width, config.classes);
  if (narrowest < collectives.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d ranks, but a layer has only %d outputs: every rank needs a shard "
        "of every bias (use at most %d ranks%s)",
        collectives.size(), narrowest, narrowest,
        config.width < config.classes ? ", or raise --width" : ""));
  }
  return absl::OkStatus();
}

std::pair<int64_t, int64_t> Mlp::Shard(int64_t n) const {
  const int64_t first = n * rank() / ranks();
  return {first, n * (rank() + 1) / ranks() - first};
}

absl::Status Mlp::CreateSlots() {
  int64_t w = 0, b = 0;
  for (const Layer& L : layers_) {
    w = std::max(w, L.in * L.out);
    b = std::max(b, L.out);
  }
  using K = TensorKind;
  const DType f32 = DType::kFloat32;
  // Mixed: 16-bit parameters gathered, the chain's sums in fp32 (a 16-bit
  // running sum would round where the unsharded model's does not).
  const DType param = ParameterDType(config_.precision);
  for (int s = 0; s < 2; ++s) {
    Slot& slot = slots_[s];
    auto make = [&](const char* what, K kind, DType dtype, int64_t n) {
      return CreateTensor(absl::StrFormat("gather%d.%s", s, what), kind, dtype,
                          {n}, Tier::kDevice);
    };
    STRATA_ASSIGN_OR_RETURN(slot.w, make("weight", K::kParameter, param, w));
    STRATA_ASSIGN_OR_RETURN(slot.b, make("bias", K::kParameter, param, b));
    STRATA_ASSIGN_OR_RETURN(slot.gw, make("weight.grad", K::kGradient, f32, w));
    STRATA_ASSIGN_OR_RETURN(slot.gb, make("bias.grad", K::kGradient, f32, b));
  }
  updates_.resize(layers_.size());
  return absl::OkStatus();
}

absl::Status Mlp::BeginPass() {
  if (!sharded()) return absl::OkStatus();
  slot_leases_ = std::make_unique<LeaseGroup>(store_, Tier::kDevice,
                                              compute_->stream(), &created_);
  for (Slot& slot : slots_) {
    // SlotData's order.
    for (TensorId id : {slot.w, slot.b, slot.gw, slot.gb}) {
      slot_leases_->Add(id, Access::kOverwrite);
    }
    slot.layer = -1;  // the shards may have been updated since
  }
  return slot_leases_->Acquire();
}

absl::Status Mlp::EndPass() {
  if (!sharded()) return absl::OkStatus();
  absl::Status status;
  for (Slot& slot : slots_) {
    if (status.ok()) status = WaitAll(*collectives_, slot.gathering);
    if (status.ok()) status = WaitAll(*collectives_, slot.sending);
    slot.gather_sources.reset();
    slot.layer = -1;
  }
  for (ShardUpdate& u : updates_) {
    if (status.ok()) status = WaitAll(*collectives_, u.receiving);
    u.targets.reset();
  }
  if (slot_leases_) status.Update(slot_leases_->Release());
  slot_leases_.reset();
  return status;
}

// A request left unwaited here is never waited for: the thread ranks copy
// at Wait, and an MPI rank whose step failed ends the run (AbortMpiRun)
// before the buffers go.
void Mlp::AbandonPass() {
  for (Slot& slot : slots_) {
    slot.gathering.clear();
    slot.sending.clear();
    slot.gather_sources.reset();  // ~LeaseGroup releases
    slot.layer = -1;
  }
  for (ShardUpdate& u : updates_) {
    u.receiving.clear();
    u.targets.reset();
  }
  slot_leases_.reset();
}

void Mlp::FailPass(const absl::Status& why) {
  if (!sharded()) return;
  AbandonPass();
  if (failed_.ok()) {
    failed_ = absl::FailedPreconditionError(absl::StrFormat(
        "an earlier sharded step failed, leaving the ranks' shards out of "
        "step; end the run (the failure: %s)",
        why.message()));
  }
}

absl::Status Mlp::StartGather(int l) {
  Slot& slot = slots_[l % 2];
  if (slot.layer == l) return absl::OkStatus();  // held, or on its way
  // The slot's previous layer is done with (its gather was waited for).
  const Layer& L = layers_[l];
  slot.gather_sources = std::make_unique<LeaseGroup>(
      store_, Tier::kHost, /*stream=*/nullptr, &created_);
  const int w = slot.gather_sources->Add(L.w, Access::kRead);
  const int b = slot.gather_sources->Add(L.b, Access::kRead);
  STRATA_RETURN_IF_ERROR(slot.gather_sources->Acquire());
  const int s = l % 2;
  const uint64_t e = PrecisionBytes(config_.precision);  // of a parameter
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request rw,
      collectives_->StartAllGather(
          slot.gather_sources->data(w), SlotData(s, kSlotW),
          ShardByteOffsets(L.in * L.out, ranks(), e),
          absl::StrFormat("the all-gather of layer%d.weight", l)));
  slot.gathering.push_back(rw);
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request rb,
      collectives_->StartAllGather(
          slot.gather_sources->data(b), SlotData(s, kSlotB),
          ShardByteOffsets(L.out, ranks(), e),
          absl::StrFormat("the all-gather of layer%d.bias", l)));
  slot.gathering.push_back(rb);
  slot.layer = l;
  return absl::OkStatus();
}

absl::Status Mlp::EnsureGathered(int l) {
  STRATA_RETURN_IF_ERROR(StartGather(l));
  Slot& slot = slots_[l % 2];
  STRATA_RETURN_IF_ERROR(WaitAll(*collectives_, slot.gathering));
  if (!slot.gather_sources) return absl::OkStatus();
  absl::Status released = slot.gather_sources->Release();
  slot.gather_sources.reset();
  return released;
}

absl::Status Mlp::ReceivePartialGradients(int l) {
  const int s = l % 2;
  // The gradient buffers may still be sending layer l + 2's sums.
  STRATA_RETURN_IF_ERROR(WaitAll(*collectives_, slots_[s].sending));
  if (rank() == 0) return absl::OkStatus();
  const Layer& L = layers_[l];
  std::vector<Collectives::Request> rs;
  STRATA_ASSIGN_OR_RETURN(
      rs.emplace_back(),
      collectives_->StartRecv(
          rank() - 1, Tag(l, kPartialW), SlotData(s, kSlotGw),
          L.in * L.out * kF,
          absl::StrFormat("the gradient sum of layer%d.weight", l)));
  STRATA_ASSIGN_OR_RETURN(
      rs.emplace_back(),
      collectives_->StartRecv(
          rank() - 1, Tag(l, kPartialB), SlotData(s, kSlotGb), L.out * kF,
          absl::StrFormat("the gradient sum of layer%d.bias", l)));
  return WaitAll(*collectives_, rs);
}

absl::Status Mlp::PassGradients(int l) {
  const int s = l % 2;
  Slot& slot = slots_[s];
  const Layer& L = layers_[l];
  const int last = ranks() - 1;
  struct Part {
    SlotBuffer buffer;
    int64_t n;
    TagKind partial, shard;
    const char* name;
  };
  const Part parts[] = {{kSlotGw, L.in * L.out, kPartialW, kShardW, "weight"},
                        {kSlotGb, L.out, kPartialB, kShardB, "bias"}};
  ShardUpdate& u = updates_[l];
  u.targets = std::make_unique<LeaseGroup>(store_, Tier::kHost,
                                           /*stream=*/nullptr, &created_);
  const int targets[] = {u.targets->Add(L.gw, Access::kOverwrite),
                         u.targets->Add(L.gb, Access::kOverwrite)};
  STRATA_RETURN_IF_ERROR(u.targets->Acquire());
  for (int i = 0; i < 2; ++i) {
    const Part& p = parts[i];
    const float* sum = SlotData(s, p.buffer);
    float* const mine = u.targets->data(targets[i]);
    const std::vector<int64_t> at = ShardOffsets(p.n, ranks());
    if (rank() < last) {
      STRATA_ASSIGN_OR_RETURN(
          slot.sending.emplace_back(),
          collectives_->StartSend(
              rank() + 1, Tag(l, p.partial), sum, p.n * kF,
              absl::StrFormat("the gradient sum of layer%d.%s", l, p.name)));
      continue;
    }
    // The last rank holds the total: every rank's shard of it.
    for (int r = 0; r < last; ++r) {
      STRATA_ASSIGN_OR_RETURN(
          slot.sending.emplace_back(),
          collectives_->StartSend(
              r, Tag(l, p.shard), sum + at[r], (at[r + 1] - at[r]) * kF,
              absl::StrFormat("the gradient shard of layer%d.%s", l, p.name)));
    }
    // This rank's own shard of the total: out of the device slot (a D2H
    // after the backward that summed it, on a GPU).
    STRATA_RETURN_IF_ERROR(slot_leases_->lease(s * kSlotBuffers + p.buffer)
                               .CopyOut(at[last] * kF, mine,
                                        (at[last + 1] - at[last]) * kF,
                                        compute_->stream()));
  }
  // Both sums before either shard: the last rank receives both before it
  // sends, and under NCCL's rules (one stream, messages in order;
  // collectives.h) a receive started between the sends would hold the
  // second back.
  for (int i = 0; rank() < last && i < 2; ++i) {
    const Part& p = parts[i];
    const std::vector<int64_t> at = ShardOffsets(p.n, ranks());
    STRATA_ASSIGN_OR_RETURN(
        u.receiving.emplace_back(),
        collectives_->StartRecv(
            last, Tag(l, p.shard), u.targets->data(targets[i]),
            (at[rank() + 1] - at[rank()]) * kF,
            absl::StrFormat("the gradient shard of layer%d.%s", l, p.name)));
  }
  return absl::OkStatus();
}

absl::Status Mlp::UpdateShard(int l, const AdamParams& adam) {
  ShardUpdate& u = updates_[l];
  STRATA_RETURN_IF_ERROR(WaitAll(*collectives_, u.receiving));
  if (u.targets) {
    STRATA_RETURN_IF_ERROR(u.targets->Release());
    u.targets.reset();
  }
  if (mixed()) return absl::OkStatus();  // FinishMixedStep: all or none
  const Layer& L = layers_[l];
  STRATA_RETURN_IF_ERROR(AdamOn(adam, L.sw, L.gw, L.w, 0));
  return AdamOn(adam, L.sb, L.gb, L.b, 0);
}

absl::StatusOr<int64_t> Mlp::CastGradientShards() {
  int64_t mine = 0;
  for (const Layer& L : layers_) {
    LeaseGroup g(store_, Tier::kHost, /*stream=*/nullptr, &created_);
    const int gw = g.Add(L.gw, Access::kRead);
    const int gb = g.Add(L.gb, Access::kRead);
    const int gw16 = g.Add(L.gw16, Access::kOverwrite);
    const int gb16 = g.Add(L.gb16, Access::kOverwrite);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    // Round to nearest, as CastGradients: the same bits as the whole sum's.
    mine += CastToHalfCpu(config_.precision, {}, g.data(gw), g.half(gw16),
                          Shard(L.in * L.out).second);
    mine += CastToHalfCpu(config_.precision, {}, g.data(gb), g.half(gb16),
                          Shard(L.out).second);
    STRATA_RETURN_IF_ERROR(g.Release());
    STRATA_RETURN_IF_ERROR(store_->Discard(L.gw));
    STRATA_RETURN_IF_ERROR(store_->Discard(L.gb));
  }
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<int64_t> all,
      AllGatherValue(*collectives_, mine,
                     "the all-gather of non-finite gradients"));
  int64_t sum = 0;
  for (int64_t n : all) sum += n;
  return sum;
}

absl::StatusOr<LossResult> Mlp::GatherLoss(
    const std::vector<LossResult>& mine) {
  static_assert(std::is_trivially_copyable_v<LossResult>);
  const uint64_t each = mine.size() * sizeof(LossResult);
  std::vector<uint64_t> offsets;
  for (int r = 0; r <= ranks(); ++r) offsets.push_back(each * r);
  std::vector<LossResult> all(mine.size() * ranks());
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request r,
      collectives_->StartAllGather(mine.data(), all.data(), offsets,
                                   "the all-gather of the step's losses"));
  STRATA_RETURN_IF_ERROR(collectives_->Wait(r));
  // Rank-major is the global micro-batch order: the unsharded run's sum.
  LossResult sum;
  for (const LossResult& x : all) {
    sum.loss_sum += x.loss_sum;
    sum.correct += x.correct;
  }
  return sum;
}

absl::Status Mlp::GatherWeights(int layer, std::vector<float>* out) {
  const Layer& L = layers_[layer];
  // This rank's fp32 shard: the weight, or under mixed precision its master
  // weights' parts.
  std::vector<float> mine(Shard(L.in * L.out).second);
  if (!mixed()) {
    STRATA_RETURN_IF_ERROR(store_->Read(L.w, mine.data(), mine.size() * kF));
  }
  for (size_t k = 0; mixed() && k < L.sw.parts.size(); ++k) {
    const OptimizerPart& part = L.sw.parts[k];
    STRATA_RETURN_IF_ERROR(store_->Read(
        L.sw.master[k], mine.data() + part.first, part.count * kF));
  }
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request r,
      collectives_->StartAllGather(
          mine.data(), out->data(), ShardByteOffsets(L.in * L.out, ranks(), kF),
          absl::StrFormat("the all-gather of layer%d.weight", layer)));
  return collectives_->Wait(r);
}

}  // namespace strata::train
