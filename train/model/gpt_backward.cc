// gpt_backward.cc: Gpt's backward pass (see gpt.h): the final norm, each
// block's operations in reverse, the embeddings; each operation leases what it
// touches on the device tier as one LeaseGroup, and an activation is
// discarded after its last use.
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/model/gpt.h"
#include "train/model/lease_group.h"

namespace strata::train {

namespace {

constexpr uint64_t kF = sizeof(float);
constexpr Access kR = Access::kRead;
constexpr Access kW = Access::kWrite;
constexpr Access kO = Access::kOverwrite;

const int32_t* Ints(const LeaseGroup& g, int i) {
  return reinterpret_cast<const int32_t*>(g.data(i));
}

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

absl::Status Gpt::LinearGrad(const LeaseGroup& g, int x, int w, int dy, int dw,
                             int db, int dx, int64_t in, int64_t out,
                             bool accumulate) {
  if (!mixed()) {
    return compute_->LinearBackward(g.data(x), g.data(w), g.data(dy),
                                    g.data(dw), g.data(db), g.data(dx), rows_,
                                    in, out, accumulate);
  }
  return compute_->LinearBackward16(config_.precision, g.data(x), g.half(w),
                                    g.data(dy), g.data(dw), g.data(db),
                                    g.data(dx), rows_, in, out, accumulate);
}

absl::Status Gpt::Drop(TensorId id) {
  activations_.Dropped(id);
  return store_->Discard(id);
}

absl::Status Gpt::FinalNormBackward(int k) {
  SetMicro(k);
  const int64_t N = rows_, C = config_.embed;
  const ParamSlot& w = cg_.lnf.params[0];
  const ParamSlot& b = cg_.lnf.params[1];
  const MicroIo& io = io_[k];
  const Access grads = Adds(k) ? kW : kO;
  LeaseGroup g = DeviceGroup();
  const int x = g.Add(io.out, kR), wi = g.Add(w.w, kR),
            st = g.Add(io.lnf_stats, kR), dln = g.Add(io_[k].dln, kR),
            dres = g.Add(io.dres, kO), dw = g.Add(w.g, grads),
            db = g.Add(b.g, grads);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  STRATA_RETURN_IF_ERROR(compute_->Zero(g.data(dres), g.bytes(dres) / kF));
  if (!Adds(k)) {
    for (int i : {dw, db}) {
      STRATA_RETURN_IF_ERROR(compute_->Zero(g.data(i), g.bytes(i) / kF));
    }
  }
  STRATA_RETURN_IF_ERROR(compute_->LayerNormBackward(
      g.data(x), g.data(wi), g.data(st), g.data(st) + N, g.data(dln),
      g.data(dres), g.data(dw), g.data(db), N, C));
  STRATA_RETURN_IF_ERROR(g.Release());
  for (TensorId id : {io.out, io.lnf_stats, io_[k].dln}) {
    STRATA_RETURN_IF_ERROR(Drop(id));
  }
  return absl::OkStatus();
}

// LayerNorm backward into the residual gradient: dres += dx; the norm's own
// weight and bias gradients overwritten by the first micro-batch, added to
// by the others.
absl::Status Gpt::NormBackward(TensorId x_id, const ParamSlot& w,
                               const ParamSlot& b, TensorId stats_id, int k) {
  const TensorId dres_id = io_[k].dres, dln_id = io_[k].dln;
  const bool first = !Adds(k);
  const int64_t N = rows_, C = config_.embed;
  const Access grads = first ? kO : kW;
  LeaseGroup g = DeviceGroup();
  const int x = g.Add(x_id, kR), wi = g.Add(w.w, kR), st = g.Add(stats_id, kR),
            dln = g.Add(dln_id, kR), dres = g.Add(dres_id, kW),
            dw = g.Add(w.g, grads), db = g.Add(b.g, grads);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  if (first) {
    for (int i : {dw, db}) {
      STRATA_RETURN_IF_ERROR(compute_->Zero(g.data(i), g.bytes(i) / kF));
    }
  }
  STRATA_RETURN_IF_ERROR(compute_->LayerNormBackward(
      g.data(x), g.data(wi), g.data(st), g.data(st) + N, g.data(dln),
      g.data(dres), g.data(dw), g.data(db), N, C));
  STRATA_RETURN_IF_ERROR(g.Release());
  for (TensorId id : {x_id, stats_id, dln_id}) {
    STRATA_RETURN_IF_ERROR(Drop(id));
  }
  return absl::OkStatus();
}

// Under checkpointing each micro-batch recomputes its block and runs its
// backward before the next one's recompute (one micro-batch's activations
// live at a time); without, each operation runs for every micro-batch in
// turn, so its weights are leased once for all of them.
absl::Status Gpt::BlockBackward(const Block& b) {
  const int micro = static_cast<int>(micro_rows_.size());
  if (config_.checkpoint != ActivationCheckpointing::kNone) {
    for (int k = 0; k < micro; ++k) {
      // The same operations on the same input as in forward: the same bits.
      const auto start = std::chrono::steady_clock::now();
      for (int op = 0; op < kSavedOps; ++op) {
        STRATA_RETURN_IF_ERROR(ForwardOp(b, op, k));
      }
      recompute_seconds_ += Since(start);
      for (int op = 0; op < kBackwardOps; ++op) {
        STRATA_RETURN_IF_ERROR(BackwardOp(b, op, k));
      }
    }
  } else {
    for (int op = 0; op < kBackwardOps; ++op) {
      for (int k = 0; k < micro; ++k) {
        STRATA_RETURN_IF_ERROR(BackwardOp(b, op, k));
      }
    }
  }
  return absl::OkStatus();
}

// Micro-batch k's dres holds the gradient of the block's output before op
// 0, of its input after op 4; the block's parameter gradients gain its part
// (the first micro-batch overwrites them).
absl::Status Gpt::BackwardOp(const Block& b, int op, int k) {
  SetMicro(k);
  const Acts& a = b.micro[k];
  const TensorId dres_id = io_[k].dres;
  const int64_t C = config_.embed;
  const bool add = Adds(k);  // to the earlier micro-batches' gradients
  const Access grads = add ? kW : kO;
  using B = Block;
  if (op == 1) {
    return NormBackward(a.mid, b.p(B::kLn2W), b.p(B::kLn2B), a.ln2_stats, k);
  }
  if (op == 4) {
    return NormBackward(a.x, b.p(B::kLn1W), b.p(B::kLn1B), a.ln1_stats, k);
  }
  LeaseGroup g = DeviceGroup();
  if (op == 0) {  // The MLP: projection, GELU, first layer.
    const int gelu = g.Add(a.gelu, kR), pw = AddWeight(g, b.p(B::kFcProjW)),
              dres = g.Add(dres_id, kR), dpw = g.Add(b.p(B::kFcProjW).g, grads),
              dpb = g.Add(b.p(B::kFcProjB).g, grads), dfc = g.Add(s_.dfc, kO),
              fc = g.Add(a.fc, kR), ln = g.Add(a.ln2, kR),
              fw = AddWeight(g, b.p(B::kFcW)),
              dfw = g.Add(b.p(B::kFcW).g, grads),
              dfb = g.Add(b.p(B::kFcB).g, grads), dln = g.Add(io_[k].dln, kO);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(
        LinearGrad(g, gelu, pw, dres, dpw, dpb, dfc, 4 * C, C, add));
    STRATA_RETURN_IF_ERROR(
        compute_->ActivationBackward(Activation::kGeluTanh, g.data(fc),
                                     g.data(dfc), g.data(dfc), rows_ * 4 * C));
    STRATA_RETURN_IF_ERROR(
        LinearGrad(g, ln, fw, dfc, dfw, dfb, dln, C, 4 * C, add));
    STRATA_RETURN_IF_ERROR(g.Release());
    for (TensorId id : {a.gelu, a.fc, a.ln2, s_.dfc}) {
      STRATA_RETURN_IF_ERROR(Drop(id));
    }
    return absl::OkStatus();
  }
  if (op == 2) {  // The attention's projection and attention.
    const int att = g.Add(a.att, kR), pw = AddWeight(g, b.p(B::kProjW)),
              dres = g.Add(dres_id, kR), dpw = g.Add(b.p(B::kProjW).g, grads),
              dpb = g.Add(b.p(B::kProjB).g, grads), datt = g.Add(s_.datt, kO),
              qkv = g.Add(a.qkv, kR), lse = g.Add(a.lse, kR),
              dqkv = g.Add(io_[k].dqkv, kO);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(
        LinearGrad(g, att, pw, dres, dpw, dpb, datt, C, C, add));
    STRATA_RETURN_IF_ERROR(compute_->AttentionBackward(
        g.data(qkv), g.data(att), g.data(datt), g.data(lse), g.data(dqkv),
        rows_ / config_.context, config_.context, C, config_.heads));
    STRATA_RETURN_IF_ERROR(g.Release());
    for (TensorId id : {a.att, a.lse, a.qkv, s_.datt}) {
      STRATA_RETURN_IF_ERROR(Drop(id));
    }
    return absl::OkStatus();
  }
  // The QKV projection.
  const int ln = g.Add(a.ln1, kR), qw = AddWeight(g, b.p(B::kQkvW)),
            dqkv = g.Add(io_[k].dqkv, kR), dqw = g.Add(b.p(B::kQkvW).g, grads),
            dqb = g.Add(b.p(B::kQkvB).g, grads), dln = g.Add(io_[k].dln, kO);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  STRATA_RETURN_IF_ERROR(
      LinearGrad(g, ln, qw, dqkv, dqw, dqb, dln, C, 3 * C, add));
  STRATA_RETURN_IF_ERROR(g.Release());
  for (TensorId id : {a.ln1, io_[k].dqkv}) {
    STRATA_RETURN_IF_ERROR(Drop(id));
  }
  return absl::OkStatus();
}

absl::Status Gpt::EmbedBackward(int k) {
  SetMicro(k);
  const ParamSlot& wte = cg_.embeddings.params[0];
  const ParamSlot& wpe = cg_.embeddings.params[1];
  {
    LeaseGroup g = DeviceGroup();
    const int tok = g.Add(io_[k].tokens, kR), dres = g.Add(io_[k].dres, kR),
              dte = g.Add(wte.g, kW), dpe = g.Add(wpe.g, Adds(k) ? kW : kO);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    if (!Adds(k)) {
      STRATA_RETURN_IF_ERROR(compute_->Zero(g.data(dpe), g.bytes(dpe) / kF));
    }
    STRATA_RETURN_IF_ERROR(compute_->EmbeddingBackward(
        Ints(g, tok), g.data(dres), g.data(dte), g.data(dpe),
        rows_ / config_.context, config_.context, config_.embed,
        config_.vocab));
    STRATA_RETURN_IF_ERROR(g.Release());
  }
  for (TensorId id : {io_[k].tokens, io_[k].dres}) {
    STRATA_RETURN_IF_ERROR(Drop(id));
  }
  return absl::OkStatus();  // TrainStep hands the embeddings over last
}

// Every activation and temporary, for a pass that ends early (evaluation,
// generation, an error).
absl::Status Gpt::DiscardActivations() {
  absl::Status status;
  for (const Block& b : blocks_) {
    for (const Acts& a : b.micro) status.Update(DropBlock(a));
  }
  for (const MicroIo& io : io_) {
    for (TensorId id : {io.tokens, io.targets, io.out, io.lnf_out, io.lnf_stats,
                        io.dres, io.dln, io.dqkv}) {
      status.Update(Drop(id));
    }
  }
  for (TensorId id : {s_.logits, s_.datt, s_.dfc}) {
    status.Update(Drop(id));
  }
  return status;
}

absl::Status Gpt::BackwardBlocks() {
  for (int l = static_cast<int>(blocks_.size()) - 1; l >= 0; --l) {
    const Block& b = blocks_[l];
    if (!sharded()) {
      STRATA_RETURN_IF_ERROR(BlockBackward(b));
      STRATA_RETURN_IF_ERROR(optimizer_.GroupComplete(b.group));
      continue;
    }
    STRATA_RETURN_IF_ERROR(EnsureGathered(l));
    if (l > 0) STRATA_RETURN_IF_ERROR(StartGather(l - 1));
    // The slot's gradients may still be sending block l + 2's sums.
    STRATA_RETURN_IF_ERROR(WaitSends(*b.compute));
    if (rank() > 0) {
      std::vector<int> all(Block::kCount);
      for (int i = 0; i < Block::kCount; ++i) all[i] = i;
      STRATA_RETURN_IF_ERROR(ReceivePartialSums(*b.compute, GroupId(l), all,
                                                kPartialSum, rank() - 1));
    }
    STRATA_RETURN_IF_ERROR(BlockBackward(b));
    STRATA_RETURN_IF_ERROR(PassGradients(*b.compute, b.group, GroupId(l)));
    // The group before, one block late: its totals had a block's time.
    while (pending_.size() > 1) STRATA_RETURN_IF_ERROR(CompletePending());
  }
  return absl::OkStatus();
}

absl::Status Gpt::BackwardEmbeddings() {
  if (sharded()) {
    STRATA_RETURN_IF_ERROR(WaitSends(cg_.embeddings));
    // Rank 0: the classifier's total to add to.
    STRATA_RETURN_IF_ERROR(AwaitClassifierTotal());
    if (rank() > 0) {
      STRATA_RETURN_IF_ERROR(ReceivePartialSums(
          cg_.embeddings, EmbeddingsId(), {0, 1}, kPartialSum, rank() - 1));
    }
  }
  for (int k = 0; k < static_cast<int>(micro_rows_.size()); ++k) {
    STRATA_RETURN_IF_ERROR(EmbedBackward(k));
  }
  if (!sharded()) return absl::OkStatus();  // EndStep hands them over
  STRATA_RETURN_IF_ERROR(
      PassGradients(cg_.embeddings, g_.embeddings, EmbeddingsId()));
  while (pending_.size() > 1) STRATA_RETURN_IF_ERROR(CompletePending());
  return absl::OkStatus();
}

}  // namespace strata::train
