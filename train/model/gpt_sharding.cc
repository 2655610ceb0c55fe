// gpt_sharding.cc: the Gpt as one rank of a sharded data-parallel run
// (gpt.h's Create with Collectives; ZeRO-3, Rajbhandari et al., 2020).
//
// Every parameter's weight, gradient, moments (master weight and 16-bit
// copy under mixed precision) and rollback backup exist in this rank's
// store as shard rank() only. A block's whole parameters are all-gathered
// into one of two device gather slots (block l into slot l % 2) before it
// computes, the next block's gather started while this one runs; the
// embeddings and final norm have a slot of their own for the whole step.
//
// Gradients: as in the sharded Mlp (model_sharding.cc), a chain in rank
// order. Rank r > 0 receives rank r - 1's sums into the slot's fp32
// gradients and adds its own micro-batches to them (Adds), the last rank
// holds the totals, sums their squares for the clipping norm in the order a
// single rank does (so the norm has its bits) and sends each rank its
// shard; ClippedAdamW then updates each rank's shards as one rank updates
// the whole, and the ranks agree on the norm and non-finite count at
// EndStep (AgreeOnNorm). The tied wte's gradient is summed in two places:
// the classifier's part early in backward, the embedding's at its end, so
// its sums pass along the chain twice: rank 0 .. last for the classifier,
// the last rank's total back to rank 0, then rank 0 .. last again for the
// embedding. Each float's additions happen in the order of one rank with
// ranks x accumulate micro-batches: the same bits.
//
// A rank hands a block's shard to the optimizer one block late
// (CompletePending), so the wait for the last rank's totals overlaps the
// next block's backward.
//
// Every rank starts its operations so that NCCL's rules hold as well as
// MPI's (collectives.h; ShardedGptTest.TheProtocolKeepsToNcclOrderingRules
// runs them under those rules): the all-gathers in one order; between two
// all-gathers, the messages of each pair in the order both sides start
// them: a group's sums rank by rank, then its shards from the last rank;
// the last rank sends the final norm's shards before wte's classifier
// total, in the order rank 0 receives them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/compute/precision.h"
#include "train/model/gpt.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);
constexpr int kGlobals = 2;  // the embeddings' and final norm's slot

// The tag of parameter `param` of group `id`'s message of `kind`: unique
// per message of a step (messages of one sender and tag arrive in order).
int Tag(int id, int param, int kind) { return (id * 16 + param) * 4 + kind; }

// What the passes read of a slot: its 16-bit copy when mixed.
TensorId Readable(const ParamSlot& s) { return s.mixed() ? s.w16 : s.w; }

}  // namespace

std::pair<int64_t, int64_t> Gpt::Shard(int64_t n) const {
  const std::vector<int64_t> at = ShardOffsets(n, ranks());
  return {at[rank()], at[rank() + 1] - at[rank()]};
}

std::pair<int, int> Gpt::RankMicroBatches(int micro) const {
  const int first = static_cast<int>(int64_t{micro} * rank() / ranks());
  return {first,
          static_cast<int>(int64_t{micro} * (rank() + 1) / ranks()) - first};
}

std::unique_ptr<LeaseGroup> Gpt::ShardLeases() {
  // The host, unless every tensor is homed on the device (a lease cannot
  // reach a tier slower than the home).
  const bool device = config_.home == Tier::kDevice;
  return std::make_unique<LeaseGroup>(
      store_, device ? Tier::kDevice : Tier::kHost,
      device ? compute_->stream() : nullptr, &created_);
}

absl::Status Gpt::CreateSlots() {
  // A whole-tensor twin on the device of each state slot: the gathered
  // parameter (16-bit when the slot is mixed) and its fp32 gradient sum.
  auto twin = [&](const ParamSlot& state,
                  const std::string& name) -> absl::StatusOr<ParamSlot> {
    const int64_t n = params_[state.tensor].elements;
    ParamSlot c;
    c.type = state.type;
    c.decay = state.decay;
    c.bytes = n * kF;
    c.tensor = state.tensor;
    const DType param = c.mixed() ? ParameterDType(c.type) : DType::kFloat32;
    STRATA_ASSIGN_OR_RETURN(
        TensorId w,
        CreateTensor(name, TensorKind::kParameter, param, {n}, Tier::kDevice));
    (c.mixed() ? c.w16 : c.w) = w;
    STRATA_ASSIGN_OR_RETURN(c.g,
                            CreateTensor(name + ".grad", TensorKind::kGradient,
                                         DType::kFloat32, {n}, Tier::kDevice));
    return c;
  };
  const std::vector<ParamSlot>& block = blocks_.front().group.params;
  for (int s = 0; s < 2; ++s) {
    for (const ParamSlot& p : block) {
      // "block0.qkv.weight" -> "gather1.qkv.weight"
      const std::string& name = params_[p.tensor].name;
      STRATA_ASSIGN_OR_RETURN(
          ParamSlot c, twin(p, absl::StrFormat("gather%d%s", s,
                                               name.substr(name.find('.')))));
      slots_[s].params.push_back(c);
    }
  }
  for (auto [state, compute] :
       {std::pair{&g_.embeddings, &cg_.embeddings}, {&g_.lnf, &cg_.lnf}}) {
    compute->params.clear();
    for (const ParamSlot& p : state->params) {
      STRATA_ASSIGN_OR_RETURN(ParamSlot c,
                              twin(p, "gather." + params_[p.tensor].name));
      compute->params.push_back(c);
    }
  }
  for (size_t l = 0; l < blocks_.size(); ++l) {
    blocks_[l].compute = &slots_[l % 2];
  }
  optimizer_.SetAgreement([this](double& sum_squares, int64_t& nonfinite) {
    return AgreeOnNorm(sum_squares, nonfinite);
  });
  return absl::OkStatus();
}

absl::Status Gpt::StartGather(int l) {
  const int s = l >= 0 ? l % 2 : kGlobals;
  if (slot_layer_[s] == l) return absl::OkStatus();  // held, or on its way
  // (state, compute) pairs: the shards gathered into the slot.
  std::vector<std::pair<const ParamSlot*, const ParamSlot*>> pairs;
  auto add = [&](const ParamGroup& state, const ParamGroup& compute) {
    for (size_t i = 0; i < state.params.size(); ++i) {
      pairs.emplace_back(&state.params[i], &compute.params[i]);
    }
  };
  if (l >= 0) {
    add(blocks_[l].group, slots_[s]);
  } else {
    add(g_.embeddings, cg_.embeddings);
    add(g_.lnf, cg_.lnf);
  }
  InFlight& f = gathers_[s];  // the slot's last gather was waited for
  f.source = ShardLeases();
  f.lease = std::make_unique<LeaseGroup>(store_, Tier::kDevice,
                                         compute_->stream(), &created_);
  for (const auto& [state, compute] : pairs) {
    f.source->Add(Readable(*state), Access::kRead);
    f.lease->Add(Readable(*compute), Access::kOverwrite);
  }
  STRATA_RETURN_IF_ERROR(f.source->Acquire());
  STRATA_RETURN_IF_ERROR(f.lease->Acquire());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const ParamSlot& c = *pairs[i].second;
    const uint64_t element = c.mixed() ? 2 : kF;
    STRATA_ASSIGN_OR_RETURN(
        f.requests.emplace_back(),
        collectives_->StartAllGather(
            f.source->data(i), f.lease->data(i),
            ShardByteOffsets(c.bytes / kF, ranks(), element),
            "the all-gather of " + params_[c.tensor].name));
  }
  slot_layer_[s] = l;
  return absl::OkStatus();
}

absl::Status Gpt::EnsureGathered(int l) {
  STRATA_RETURN_IF_ERROR(StartGather(l));
  InFlight& f = gathers_[l >= 0 ? l % 2 : kGlobals];
  absl::Status status = WaitAll(*collectives_, f.requests);
  if (f.lease) status.Update(f.lease->Release());
  if (f.source) status.Update(f.source->Release());
  f.lease.reset();
  f.source.reset();
  return status;
}

absl::Status Gpt::ReceivePartialSums(const ParamGroup& compute, int id,
                                     std::vector<int> params, MessageKind kind,
                                     int from) {
  LeaseGroup g(store_, Tier::kDevice, compute_->stream(), &created_);
  for (int p : params) g.Add(compute.params[p].g, Access::kOverwrite);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  std::vector<Collectives::Request> rs;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSlot& c = compute.params[params[i]];
    STRATA_ASSIGN_OR_RETURN(
        rs.emplace_back(),
        collectives_->StartRecv(
            from, Tag(id, params[i], kind), g.data(i), c.bytes,
            "the gradient sum of " + params_[c.tensor].name));
  }
  STRATA_RETURN_IF_ERROR(WaitAll(*collectives_, rs));
  return g.Release();
}

absl::Status Gpt::WaitSends(const ParamGroup& compute) {
  absl::Status status;
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->first != &compute) {
      ++it;
      continue;
    }
    if (status.ok()) status = WaitAll(*collectives_, it->second.requests);
    status.Update(it->second.lease->Release());
    it = sends_.erase(it);
  }
  return status;
}

absl::Status Gpt::PassGradients(const ParamGroup& compute,
                                const ParamGroup& state, int id) {
  STRATA_RETURN_IF_ERROR(WaitSends(compute));
  InFlight out;
  out.lease = std::make_unique<LeaseGroup>(store_, Tier::kDevice,
                                           compute_->stream(), &created_);
  Pending p{.state = &state};
  p.receive.lease = ShardLeases();
  for (size_t i = 0; i < compute.params.size(); ++i) {
    out.lease->Add(compute.params[i].g, Access::kRead);
    p.receive.lease->Add(state.params[i].g, Access::kOverwrite);
  }
  STRATA_RETURN_IF_ERROR(out.lease->Acquire());
  STRATA_RETURN_IF_ERROR(p.receive.lease->Acquire());
  const int last = ranks() - 1;
  double sum = 0;
  for (size_t i = 0; i < compute.params.size(); ++i) {
    const ParamSlot& c = compute.params[i];
    const int64_t n = c.bytes / kF;
    const float* total = out.lease->data(i);
    float* const mine = p.receive.lease->data(i);
    const std::string& name = params_[c.tensor].name;
    const std::vector<int64_t> at = ShardOffsets(n, ranks());
    if (rank() < last) {
      STRATA_ASSIGN_OR_RETURN(
          out.requests.emplace_back(),
          collectives_->StartSend(rank() + 1, Tag(id, i, kPartialSum), total,
                                  c.bytes, "the gradient sum of " + name));
      continue;
    }
    // The totals: the norm's part in slot order (ClippedAdamW's), and every
    // rank's shard.
    STRATA_ASSIGN_OR_RETURN(const double part,
                            compute_->SumOfSquares(total, n));
    if (mixed() && !c.mixed() && !std::isfinite(part)) ++p.whole.nonfinite;
    sum += part;
    for (int r = 0; r < last; ++r) {
      STRATA_ASSIGN_OR_RETURN(
          out.requests.emplace_back(),
          collectives_->StartSend(r, Tag(id, i, kShard), total + at[r],
                                  (at[r + 1] - at[r]) * kF,
                                  "the gradient shard of " + name));
    }
    // This rank's own shard of the total, out of the device slot.
    const int64_t count = at[last + 1] - at[last];
    if (config_.home == Tier::kDevice) {  // ShardLeases' tier
      STRATA_RETURN_IF_ERROR(compute_->Copy(total + at[last], mine, count));
    } else {  // a D2H after the backward that summed it, on a GPU
      STRATA_RETURN_IF_ERROR(out.lease->lease(i).CopyOut(
          at[last] * kF, mine, count * kF, compute_->stream()));
    }
  }
  // Every sum before any shard: the last rank receives all of a group's
  // sums before it sends a shard, and under NCCL's rules (one stream,
  // messages in order; collectives.h) a receive started between the sends
  // would hold them back.
  for (size_t i = 0; rank() < last && i < compute.params.size(); ++i) {
    const ParamSlot& c = compute.params[i];
    const std::vector<int64_t> at = ShardOffsets(c.bytes / kF, ranks());
    STRATA_ASSIGN_OR_RETURN(
        p.receive.requests.emplace_back(),
        collectives_->StartRecv(
            last, Tag(id, i, kShard), p.receive.lease->data(i),
            (at[rank() + 1] - at[rank()]) * kF,
            "the gradient shard of " + params_[c.tensor].name));
  }
  p.whole.sum_squares = sum;
  sends_.emplace_back(&compute, std::move(out));
  pending_.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status Gpt::PassClassifierSum() {
  if (ranks() == 1) return absl::OkStatus();  // its own total already
  const ParamSlot& wte = cg_.embeddings.params[0];
  const bool last = rank() == ranks() - 1;
  InFlight out;
  out.lease = std::make_unique<LeaseGroup>(store_, Tier::kDevice,
                                           compute_->stream(), &created_);
  out.lease->Add(wte.g, Access::kRead);
  STRATA_RETURN_IF_ERROR(out.lease->Acquire());
  STRATA_ASSIGN_OR_RETURN(
      out.requests.emplace_back(),
      collectives_->StartSend(
          last ? 0 : rank() + 1,
          Tag(EmbeddingsId(), 0, last ? kClassifierTotal : kClassifierSum),
          out.lease->data(0), wte.bytes,
          "the classifier's gradient sum of wte"));
  sends_.emplace_back(&cg_.embeddings, std::move(out));
  return absl::OkStatus();
}

absl::Status Gpt::StartClassifierTotal() {
  if (rank() != 0 || ranks() == 1) return absl::OkStatus();
  // The total lands where the classifier's sum left from.
  STRATA_RETURN_IF_ERROR(WaitSends(cg_.embeddings));
  const ParamSlot& wte = cg_.embeddings.params[0];
  classifier_total_.lease = std::make_unique<LeaseGroup>(
      store_, Tier::kDevice, compute_->stream(), &created_);
  classifier_total_.lease->Add(wte.g, Access::kOverwrite);
  STRATA_RETURN_IF_ERROR(classifier_total_.lease->Acquire());
  STRATA_ASSIGN_OR_RETURN(
      classifier_total_.requests.emplace_back(),
      collectives_->StartRecv(ranks() - 1,
                              Tag(EmbeddingsId(), 0, kClassifierTotal),
                              classifier_total_.lease->data(0), wte.bytes,
                              "the classifier's gradient total of wte"));
  return absl::OkStatus();
}

absl::Status Gpt::AwaitClassifierTotal() {
  absl::Status status = WaitAll(*collectives_, classifier_total_.requests);
  if (classifier_total_.lease) {
    status.Update(classifier_total_.lease->Release());
  }
  classifier_total_ = InFlight{};
  return status;
}

absl::StatusOr<Gpt::Pending> Gpt::AwaitPending() {
  Pending p = std::move(pending_.front());
  pending_.erase(pending_.begin());
  STRATA_RETURN_IF_ERROR(WaitAll(*collectives_, p.receive.requests));
  STRATA_RETURN_IF_ERROR(p.receive.lease->Release());
  return p;
}

absl::Status Gpt::CompletePending() {
  STRATA_ASSIGN_OR_RETURN(Pending p, AwaitPending());
  return optimizer_.GroupComplete(*p.state, p.whole);
}

absl::StatusOr<double> Gpt::SumLosses(const std::vector<double>& mine) {
  // Each rank's part: its micro-batches' losses, in order.
  const int micro = global_micro_;
  std::vector<uint64_t> offsets;
  for (int r = 0; r <= ranks(); ++r) {
    offsets.push_back(int64_t{micro} * r / ranks() * sizeof(double));
  }
  std::vector<double> all(micro);
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request r,
      collectives_->StartAllGather(mine.data(), all.data(), offsets,
                                   "the all-gather of the step's losses"));
  STRATA_RETURN_IF_ERROR(collectives_->Wait(r));
  double loss = 0;  // in the global micro-batch order: one rank's sum
  for (double part : all) loss += part;
  return loss;
}

absl::Status Gpt::AgreeOnNorm(double& sum_squares, int64_t& nonfinite) {
  struct Part {
    double sum_squares;
    int64_t nonfinite;
  };
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<Part> all,
      AllGatherValue(*collectives_, Part{sum_squares, nonfinite},
                     "the all-gather of the gradient norm"));
  sum_squares = all.back().sum_squares;  // the rank that held the totals
  nonfinite = 0;
  for (const Part& p : all) nonfinite += p.nonfinite;
  return absl::OkStatus();
}

absl::Status Gpt::EndPass() {
  // After an error the rest is left unwaited (see WaitAll) and the caller
  // abandons the pass; the leases are released either way.
  absl::Status status;
  for (int s = 0; s < 3; ++s) {
    InFlight& f = gathers_[s];
    if (status.ok()) status = WaitAll(*collectives_, f.requests);
    if (f.lease) status.Update(f.lease->Release());
    if (f.source) status.Update(f.source->Release());
    f.lease.reset();
    f.source.reset();
    slot_layer_[s] = kNoLayer;  // the shards may be updated next
  }
  for (auto& [compute, f] : sends_) {
    if (status.ok()) status = WaitAll(*collectives_, f.requests);
    status.Update(f.lease->Release());
  }
  sends_.clear();
  if (status.ok()) {
    status = AwaitClassifierTotal();
  } else {
    classifier_total_ = InFlight{};
  }
  for (Pending& p : pending_) {
    if (status.ok()) status = WaitAll(*collectives_, p.receive.requests);
    if (p.receive.lease) status.Update(p.receive.lease->Release());
  }
  pending_.clear();
  return status;
}

// A request left unwaited here is never waited for: the thread ranks copy
// at Wait, and an MPI rank whose step failed ends the run (AbortMpiRun)
// before the buffers go.
void Gpt::AbandonPass() {
  for (int s = 0; s < 3; ++s) {
    gathers_[s] = InFlight{};  // ~LeaseGroup releases
    slot_layer_[s] = kNoLayer;
  }
  sends_.clear();
  classifier_total_ = InFlight{};
  pending_.clear();
}

absl::Status Gpt::GatherParameter(const Param& p, std::vector<float>* out) {
  std::vector<float> mine(p.slot.bytes / kF);
  STRATA_RETURN_IF_ERROR(store_->Read(p.slot.w, mine.data(), p.slot.bytes));
  out->resize(p.elements);
  STRATA_ASSIGN_OR_RETURN(
      Collectives::Request r,
      collectives_->StartAllGather(mine.data(), out->data(),
                                   ShardByteOffsets(p.elements, ranks(), kF),
                                   "the all-gather of " + p.name));
  return collectives_->Wait(r);
}

}  // namespace strata::train
