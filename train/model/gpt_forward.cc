// gpt_forward.cc: Gpt's forward pass (see gpt.h): the embeddings, each
// block's operations, the final norm and the sliced classifier. Each
// operation leases what it touches on the device tier as one LeaseGroup;
// what it writes counts toward the peak activation bytes.
#include <cmath>

#include "absl/strings/str_format.h"
#include "strata/status.h"
#include "train/model/gpt.h"
#include "train/model/lease_group.h"

namespace strata::train {

namespace {

constexpr Access kR = Access::kRead;
constexpr Access kW = Access::kWrite;
constexpr Access kO = Access::kOverwrite;

const int32_t* Ints(const LeaseGroup& g, int i) {
  return reinterpret_cast<const int32_t*>(g.data(i));
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

}  // namespace strata::train
