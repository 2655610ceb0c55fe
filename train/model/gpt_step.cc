// gpt_step.cc: Gpt's forward pass, sliced classifier, backward pass and step
// (see gpt.h). Each operation leases what it touches on the device tier as
// one LeaseGroup; activations are discarded after their last use.
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

// The device-tier group every operation below takes its leases in; what it
// writes counts toward peak_activation_bytes.
LeaseGroup Gpt::DeviceGroup() {
  return LeaseGroup(store_, Tier::kDevice, compute_->stream(), &created_,
                    &activations_);
}

int Gpt::AddWeight(LeaseGroup& g, const ParamSlot& s) {
  return g.Add(s.mixed() ? s.w16 : s.w, kR);
}

absl::Status Gpt::Linear(const LeaseGroup& g, int x, int w, int b, int y,
                         int64_t in, int64_t out) {
  if (!mixed()) {
    return compute_->LinearForward(g.data(x), g.data(w), g.data(b), g.data(y),
                                   rows_, in, out);
  }
  return compute_->LinearForward16(config_.precision, g.data(x), g.half(w),
                                   g.half(b), g.data(y), rows_, in, out);
}

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

int64_t Gpt::SplitMicroBatches(int64_t sequences, bool split) {
  micro_rows_.clear();
  for (int64_t left = sequences; left > 0; left -= config_.batch) {
    micro_rows_.push_back(std::min(left, config_.batch) * config_.context);
  }
  global_micro_ = static_cast<int>(micro_rows_.size());
  pass_rows_ = sequences * config_.context;  // the loss is the whole step's
  int64_t first = 0;
  if (split) {
    const auto [at, count] = RankMicroBatches(global_micro_);
    micro_rows_ = std::vector<int64_t>(micro_rows_.begin() + at,
                                       micro_rows_.begin() + at + count);
    first = int64_t{at} * config_.batch;
  }
  SetMicro(0);
  return first;
}

absl::Status Gpt::CheckBatch(const int32_t* inputs, const int32_t* targets,
                             int64_t sequences, bool split) const {
  split = split && sharded();
  const int64_t most = config_.step_sequences() * (split ? ranks() : 1);
  if (sequences < 1 || sequences > most) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences: must be 1..%d (--batch x --accumulate%s)", sequences,
        most, split ? " x ranks" : ""));
  }
  if (split && (sequences + config_.batch - 1) / config_.batch < ranks()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d sequences make fewer micro-batches of --batch=%d than the %d "
        "ranks: every rank needs one",
        sequences, config_.batch, ranks()));
  }
  const int64_t n = sequences * config_.context;
  for (const int32_t* t : {inputs, targets}) {
    for (int64_t i = 0; i < n; ++i) {
      if (t[i] < 0 || t[i] >= config_.vocab) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "token %d at position %d is outside the vocabulary [0, %d): the "
            "data was tokenized for another --vocab",
            t[i], i, config_.vocab));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Gpt::Upload(const int32_t* inputs, const int32_t* targets,
                         int64_t sequences, bool split) {
  STRATA_RETURN_IF_ERROR(CheckBatch(inputs, targets, sequences, split));
  split = split && sharded();
  int64_t at = SplitMicroBatches(sequences, split) * config_.context;
  for (size_t k = 0; k < micro_rows_.size(); ++k) {
    const uint64_t bytes = micro_rows_[k] * sizeof(int32_t);
    STRATA_RETURN_IF_ERROR(store_->Write(io_[k].tokens, inputs + at, bytes));
    STRATA_RETURN_IF_ERROR(store_->Write(io_[k].targets, targets + at, bytes));
    activations_.Produced(io_[k].tokens, bytes);
    activations_.Produced(io_[k].targets, bytes);
    at += micro_rows_[k];
  }
  return absl::OkStatus();
}

absl::Status Gpt::Embed(int k) {
  SetMicro(k);
  const ParamSlot& wte = cg_.embeddings.params[0];
  const ParamSlot& wpe = cg_.embeddings.params[1];
  LeaseGroup g = DeviceGroup();
  const int tok = g.Add(io_[k].tokens, kR), te = AddWeight(g, wte),
            pe = AddWeight(g, wpe), x = g.Add(blocks_.front().micro[k].x, kO);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  const int64_t B = rows_ / config_.context;
  const int64_t T = config_.context, C = config_.embed, V = config_.vocab;
  STRATA_RETURN_IF_ERROR(
      mixed() ? compute_->EmbeddingForward16(config_.precision, Ints(g, tok),
                                             g.half(te), g.half(pe), g.data(x),
                                             B, T, C, V)
              : compute_->EmbeddingForward(Ints(g, tok), g.data(te), g.data(pe),
                                           g.data(x), B, T, C, V));
  return g.Release();
}

absl::Status Gpt::ProjectMlp(const Block& b, int k, TensorId out) {
  SetMicro(k);
  const Acts& a = b.micro[k];
  const int64_t N = rows_, C = config_.embed;
  using B = Block;
  // The MLP's projection and the second residual add.
  LeaseGroup g = DeviceGroup();
  const int gelu = g.Add(a.gelu, kR), w = AddWeight(g, b.p(B::kFcProjW)),
            bias = AddWeight(g, b.p(B::kFcProjB)), mid = g.Add(a.mid, kR),
            y = g.Add(out, kO);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  STRATA_RETURN_IF_ERROR(Linear(g, gelu, w, bias, y, 4 * C, C));
  STRATA_RETURN_IF_ERROR(
      compute_->Add(g.data(y), g.data(mid), g.data(y), N * C));
  return g.Release();
}

absl::Status Gpt::CheckpointBlock(const Acts& a) {
  if (config_.checkpoint == ActivationCheckpointing::kNone) {
    return absl::OkStatus();
  }
  for (TensorId id : a.saved()) STRATA_RETURN_IF_ERROR(Drop(id));
  // The block was its input's last reader in forward: off the device now
  // rather than when room runs out.
  if (config_.checkpoint == ActivationCheckpointing::kOffload) {
    return store_->Evict(a.x, Tier::kHost);
  }
  return absl::OkStatus();
}

absl::Status Gpt::ForwardOp(const Block& b, int op, int k) {
  SetMicro(k);
  const Acts& a = b.micro[k];
  const int64_t N = rows_, C = config_.embed;
  using B = Block;
  LeaseGroup g = DeviceGroup();
  if (op == 0) {  // LayerNorm 1 and the QKV projection.
    const int x = g.Add(a.x, kR), w = g.Add(b.p(B::kLn1W).w, kR),
              bias = g.Add(b.p(B::kLn1B).w, kR), ln = g.Add(a.ln1, kO),
              st = g.Add(a.ln1_stats, kO), qw = AddWeight(g, b.p(B::kQkvW)),
              qb = AddWeight(g, b.p(B::kQkvB)), qkv = g.Add(a.qkv, kO);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(compute_->LayerNormForward(
        g.data(x), g.data(w), g.data(bias), g.data(ln), g.data(st),
        g.data(st) + N, N, C));
    STRATA_RETURN_IF_ERROR(Linear(g, ln, qw, qb, qkv, C, 3 * C));
    return g.Release();
  }
  if (op == 1) {  // Attention, its projection and the residual add.
    const int qkv = g.Add(a.qkv, kR), att = g.Add(a.att, kO),
              lse = g.Add(a.lse, kO), pw = AddWeight(g, b.p(B::kProjW)),
              pb = AddWeight(g, b.p(B::kProjB)), x = g.Add(a.x, kR),
              mid = g.Add(a.mid, kO);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_RETURN_IF_ERROR(compute_->AttentionForward(
        g.data(qkv), g.data(att), g.data(lse), N / config_.context,
        config_.context, C, config_.heads));
    STRATA_RETURN_IF_ERROR(Linear(g, att, pw, pb, mid, C, C));
    STRATA_RETURN_IF_ERROR(
        compute_->Add(g.data(mid), g.data(x), g.data(mid), N * C));
    return g.Release();
  }
  // LayerNorm 2 and the MLP's first layer.
  const int mid = g.Add(a.mid, kR), w = g.Add(b.p(B::kLn2W).w, kR),
            bias = g.Add(b.p(B::kLn2B).w, kR), ln = g.Add(a.ln2, kO),
            st = g.Add(a.ln2_stats, kO), fw = AddWeight(g, b.p(B::kFcW)),
            fb = AddWeight(g, b.p(B::kFcB)), fc = g.Add(a.fc, kO),
            gelu = g.Add(a.gelu, kO);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  STRATA_RETURN_IF_ERROR(
      compute_->LayerNormForward(g.data(mid), g.data(w), g.data(bias),
                                 g.data(ln), g.data(st), g.data(st) + N, N, C));
  STRATA_RETURN_IF_ERROR(Linear(g, ln, fw, fb, fc, C, 4 * C));
  STRATA_RETURN_IF_ERROR(compute_->ActivationForward(
      Activation::kGeluTanh, g.data(fc), g.data(gelu), N * 4 * C));
  return g.Release();
}

absl::Status Gpt::FinalNorm(int k) {
  SetMicro(k);
  const int64_t N = rows_;
  LeaseGroup g = DeviceGroup();
  const int x = g.Add(io_[k].out, kR), w = g.Add(cg_.lnf.params[0].w, kR),
            bias = g.Add(cg_.lnf.params[1].w, kR),
            ln = g.Add(io_[k].lnf_out, kO), st = g.Add(io_[k].lnf_stats, kO);
  STRATA_RETURN_IF_ERROR(g.Acquire());
  STRATA_RETURN_IF_ERROR(
      compute_->LayerNormForward(g.data(x), g.data(w), g.data(bias), g.data(ln),
                                 g.data(st), g.data(st) + N, N, config_.embed));
  return g.Release();
}

// logits = lnf_out wte^T one slice of rows at a time; with the gradient,
// dlogits (in place) gives dln = dlogits wte and wte.grad += dlogits^T x.
absl::StatusOr<double> Gpt::Classifier(bool gradient, int k, int64_t first_row,
                                       int64_t rows) {
  SetMicro(k);
  const int64_t C = config_.embed, V = config_.vocab;
  const int64_t S = config_.classifier_rows;
  const ParamSlot& wte = cg_.embeddings.params[0];
  LeaseGroup g = DeviceGroup();
  const int x = g.Add(io_[k].lnf_out, kR), w = AddWeight(g, wte),
            logits = g.Add(s_.logits, kO), tg = g.Add(io_[k].targets, kR);
  const int dln = gradient ? g.Add(io_[k].dln, kO) : -1;
  const int dw = gradient ? g.Add(wte.g, Adds(k) ? kW : kO) : -1;
  STRATA_RETURN_IF_ERROR(g.Acquire());
  double loss = 0;
  // The gradient of the mean over the whole step's tokens, times fp16's
  // loss scale (a power of two: exact).
  const float scale = (loss_scale_ ? loss_scale_->scale() : 1.0f) /
                      static_cast<float>(pass_rows_);
  const Precision type = config_.precision;
  for (int64_t r0 = first_row; r0 < first_row + rows; r0 += S) {
    const int64_t s = std::min(S, first_row + rows - r0);
    const bool add = r0 != first_row || Adds(k);  // to wte's gradient so far
    float* z = g.data(logits);
    const float* xs = g.data(x) + r0 * C;
    if (mixed()) {  // the tied wte as a bias-free 16-bit linear layer
      STRATA_RETURN_IF_ERROR(
          compute_->LinearForward16(type, xs, g.half(w), nullptr, z, s, C, V));
    } else {
      STRATA_RETURN_IF_ERROR(compute_->Gemm(false, true, s, V, C, xs, C,
                                            g.data(w), C, 0.0f, z, V));
    }
    STRATA_ASSIGN_OR_RETURN(
        double part,
        compute_->CrossEntropy(z, Ints(g, tg) + r0, gradient ? z : nullptr, s,
                               V, scale));
    loss += part;
    if (!gradient) continue;
    float* dx = g.data(dln) + r0 * C;
    if (mixed()) {
      STRATA_RETURN_IF_ERROR(compute_->LinearBackward16(
          type, xs, g.half(w), z, g.data(dw), nullptr, dx, s, C, V, add));
      continue;
    }
    STRATA_RETURN_IF_ERROR(
        compute_->Gemm(false, false, s, C, V, z, V, g.data(w), C, 0.0f, dx, C));
    STRATA_RETURN_IF_ERROR(compute_->Gemm(true, false, V, C, s, z, V, xs, C,
                                          add ? 1.0f : 0.0f, g.data(dw), C));
  }
  STRATA_RETURN_IF_ERROR(g.Release());
  return loss;
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

// Layer-major: every micro-batch through each operation of a block before
// the next operation, so its weights are leased once for all of them.
absl::Status Gpt::DropBlock(const Acts& a) {
  STRATA_RETURN_IF_ERROR(Drop(a.x));
  for (TensorId id : a.saved()) STRATA_RETURN_IF_ERROR(Drop(id));
  return absl::OkStatus();
}

absl::Status Gpt::Forward(bool for_backward) {
  const int micro = static_cast<int>(micro_rows_.size());
  if (sharded()) STRATA_RETURN_IF_ERROR(EnsureGathered(-1));
  for (int k = 0; k < micro; ++k) STRATA_RETURN_IF_ERROR(Embed(k));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    if (sharded()) {  // this block's parameters, and the next's on their way
      STRATA_RETURN_IF_ERROR(EnsureGathered(l));
      if (l + 1 < blocks_.size()) STRATA_RETURN_IF_ERROR(StartGather(l + 1));
    }
    for (int op = 0; op < kSavedOps; ++op) {
      for (int k = 0; k < micro; ++k) {
        STRATA_RETURN_IF_ERROR(ForwardOp(b, op, k));
      }
    }
    for (int k = 0; k < micro; ++k) {
      const TensorId out =
          l + 1 < blocks_.size() ? blocks_[l + 1].micro[k].x : io_[k].out;
      STRATA_RETURN_IF_ERROR(ProjectMlp(b, k, out));
      STRATA_RETURN_IF_ERROR(for_backward ? CheckpointBlock(b.micro[k])
                                          : DropBlock(b.micro[k]));
    }
  }
  for (int k = 0; k < micro; ++k) STRATA_RETURN_IF_ERROR(FinalNorm(k));
  return absl::OkStatus();
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

absl::StatusOr<double> Gpt::ForwardBackward(const int32_t* inputs,
                                            const int32_t* targets,
                                            int64_t sequences) {
  STRATA_RETURN_IF_ERROR(Upload(inputs, targets, sequences, /*split=*/true));
  STRATA_RETURN_IF_ERROR(Forward());
  const int micro = static_cast<int>(micro_rows_.size());
  if (sharded() && rank() > 0) {  // rank r - 1's sums to add to
    STRATA_RETURN_IF_ERROR(ReceivePartialSums(cg_.embeddings, EmbeddingsId(),
                                              {0}, kClassifierSum, rank() - 1));
    STRATA_RETURN_IF_ERROR(
        ReceivePartialSums(cg_.lnf, kLnfId, {0, 1}, kPartialSum, rank() - 1));
  }
  std::vector<double> losses;
  // Each micro-batch's classifier and final norm in turn: dln is shared.
  for (int k = 0; k < micro; ++k) {
    STRATA_ASSIGN_OR_RETURN(losses.emplace_back(),
                            Classifier(true, k, 0, rows_));
    for (TensorId id : {io_[k].lnf_out, io_[k].targets}) {
      STRATA_RETURN_IF_ERROR(Drop(id));
    }
    STRATA_RETURN_IF_ERROR(FinalNormBackward(k));
  }
  STRATA_RETURN_IF_ERROR(Drop(s_.logits));
  double loss = 0;
  for (double part : losses) loss += part;
  if (sharded() && rank() == ranks() - 1) {
    // The final norm's shards first: rank 0 receives them before wte's
    // total (it sends its sums of both first).
    STRATA_RETURN_IF_ERROR(PassGradients(cg_.lnf, g_.lnf, kLnfId));
    STRATA_RETURN_IF_ERROR(PassClassifierSum());
  } else if (sharded()) {
    STRATA_RETURN_IF_ERROR(PassClassifierSum());
    STRATA_RETURN_IF_ERROR(PassGradients(cg_.lnf, g_.lnf, kLnfId));
    STRATA_RETURN_IF_ERROR(StartClassifierTotal());
  } else {
    STRATA_RETURN_IF_ERROR(optimizer_.GroupComplete(g_.lnf));
  }
  STRATA_RETURN_IF_ERROR(BackwardBlocks());
  STRATA_RETURN_IF_ERROR(BackwardEmbeddings());
  STRATA_RETURN_IF_ERROR(compute_->Synchronize());
  // Last: an all-gather earlier would hold rank 0 until the last rank's
  // classifier is done.
  if (sharded()) return SumLosses(losses);
  return loss;
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

absl::StatusOr<std::optional<float>> Gpt::EndOptimizerStep() {
  if (!sharded()) return optimizer_.EndStep(g_.embeddings);
  STRATA_ASSIGN_OR_RETURN(Pending p, AwaitPending());  // the embeddings'
  return optimizer_.EndStep(g_.embeddings, p.whole);
}

AdamParams Gpt::StepAdamParams() const {
  AdamParams p = config_.adam;
  p.lr = lr_;
  const double t = static_cast<double>(steps_ + 1);
  p.correction1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  p.correction2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  return p;
}

std::optional<MixedStep> Gpt::StepMixed() const {
  if (!mixed()) return std::nullopt;
  return MixedStep{
      .grad_scale = loss_scale_ ? loss_scale_->inverse_scale() : 1.0f,
      .rounding = config_.rounding,
      .seed = config_.seed,
      .step = steps_};
}

bool Gpt::MixedStepApplied() {
  const int64_t nonfinite = optimizer_.step_nonfinite();
  // The optimizer skipped the step exactly when it saw a non-finite value.
  const bool applied =
      loss_scale_ ? loss_scale_->Update(steps_ + skipped_steps_, nonfinite)
                  : nonfinite == 0;
  if (!applied) ++skipped_steps_;
  return applied;
}

absl::StatusOr<std::optional<float>> Gpt::StepPass(
    const int32_t* inputs, const int32_t* targets, int64_t sequences,
    const AdamParams& adam, std::optional<float> coefficient,
    const std::optional<MixedStep>& mixed, double* loss) {
  store_->BeginStep();
  optimizer_.BeginStep(adam, coefficient, mixed);
  absl::StatusOr<double> sum = ForwardBackward(inputs, targets, sequences);
  absl::StatusOr<std::optional<float>> rerun =
      sum.ok() ? EndOptimizerStep() : sum.status();
  absl::Status finished = FinishPass(rerun.status());
  store_->EndStep();
  if (!finished.ok()) {
    DiscardActivations().IgnoreError();
    return finished;
  }
  if (loss != nullptr) *loss = *sum;
  return rerun;
}

absl::Status Gpt::FinishPass(absl::Status status) {
  if (!sharded()) return status;
  if (status.ok()) status = EndPass();
  if (status.ok()) return status;
  AbandonPass();
  if (failed_.ok()) {
    failed_ = absl::FailedPreconditionError(absl::StrFormat(
        "an earlier sharded step failed, leaving the ranks' shards out of "
        "step; end the run (the failure: %s)",
        status.message()));
  }
  return status;
}

absl::StatusOr<double> Gpt::TrainStep(const int32_t* inputs,
                                      const int32_t* targets,
                                      int64_t sequences) {
  STRATA_RETURN_IF_ERROR(failed_);
  // Bad input before anything is exchanged: the run may go on.
  STRATA_RETURN_IF_ERROR(CheckBatch(inputs, targets, sequences, true));
  const AdamParams adam = StepAdamParams();
  const Stats before = store_->GetStats();
  // What the links moved in this step, a re-run included (train_link_bytes).
  const uint64_t sent_before = sharded() ? collectives_->bytes_sent() : 0;
  auto count_links = [&] {
    if (sharded()) {
      train_bytes_sent_ += collectives_->bytes_sent() - sent_before;
    }
    const Stats after = store_->GetStats();
    for (int i = 0; i < kNumLinks; ++i) {
      train_link_bytes_[i] += after.links[i].bytes - before.links[i].bytes;
    }
  };
  const std::optional<MixedStep> mixed = StepMixed();
  double loss = 0;
  absl::StatusOr<std::optional<float>> rerun =
      StepPass(inputs, targets, sequences, adam, std::nullopt, mixed, &loss);
  if (!rerun.ok()) {
    count_links();
    return rerun.status();
  }
  if (rerun->has_value()) {
    // The norm exceeded the limit: the updated groups were restored; the
    // same gradients again, clipped this time.
    const auto start = std::chrono::steady_clock::now();
    absl::Status again =
        StepPass(inputs, targets, sequences, adam, **rerun, mixed, nullptr)
            .status();
    rollback_seconds_ += Since(start);
    if (!again.ok()) {
      count_links();
      return again;
    }
  }
  count_links();
  if (mixed.has_value() && !MixedStepApplied()) return loss;  // skipped
  ++steps_;
  return loss;
}

absl::StatusOr<double> Gpt::Evaluate(const int32_t* inputs,
                                     const int32_t* targets,
                                     int64_t sequences) {
  STRATA_RETURN_IF_ERROR(failed_);
  STRATA_RETURN_IF_ERROR(CheckBatch(inputs, targets, sequences, false));
  store_->BeginStep();
  absl::StatusOr<double> loss = [&]() -> absl::StatusOr<double> {
    STRATA_RETURN_IF_ERROR(Upload(inputs, targets, sequences));
    STRATA_RETURN_IF_ERROR(Forward(/*for_backward=*/false));
    double sum = 0;
    for (int k = 0; k < static_cast<int>(micro_rows_.size()); ++k) {
      STRATA_ASSIGN_OR_RETURN(double part,
                              Classifier(false, k, 0, micro_rows_[k]));
      sum += part;
    }
    return sum;
  }();
  absl::Status finished = FinishPass(loss.status());
  absl::Status discard = DiscardActivations();
  store_->EndStep();
  if (!finished.ok()) return finished;
  if (loss.ok() && !discard.ok()) return discard;
  return loss;
}

absl::StatusOr<std::vector<float>> Gpt::LastLogits(const int32_t* inputs,
                                                   int64_t sequences,
                                                   int64_t row) {
  if (row < 0 || row >= sequences) {
    return absl::InvalidArgumentError(
        absl::StrFormat("row %d of %d sequences", row, sequences));
  }
  STRATA_RETURN_IF_ERROR(failed_);
  // The targets only feed the loss, which is not used: the inputs serve.
  store_->BeginStep();
  std::vector<float> logits(config_.vocab);
  absl::Status status = [&]() -> absl::Status {
    STRATA_RETURN_IF_ERROR(Upload(inputs, inputs, sequences));
    STRATA_RETURN_IF_ERROR(Forward(/*for_backward=*/false));
    // The row's micro-batch, and its last position there.
    const int k = static_cast<int>(row / config_.batch);
    const int64_t last =
        (row % config_.batch) * config_.context + config_.context - 1;
    STRATA_RETURN_IF_ERROR(Classifier(false, k, last, 1).status());
    return store_->Read(s_.logits, logits.data(), logits.size() * kF);
  }();
  status = FinishPass(status);
  status.Update(DiscardActivations());
  store_->EndStep();
  if (!status.ok()) return status;
  return logits;
}

}  // namespace strata::train
