// mlp_backward.cc: the Mlp's backward pass and optimizer step (see
// model.h): each layer's gradients, layer-major over the micro-batches, its
// Adam update as soon as they are complete (the 16-bit casts in mixed
// precision), and the activations discarded after their last use.
#include <chrono>
#include <cmath>
#include <utility>

#include "strata/status.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/half.h"
#include "train/model/lease_group.h"
#include "train/model/model.h"
#include "train/model/model_sharding.h"

namespace strata::train {

namespace {

constexpr uint64_t kF = sizeof(float);

}  // namespace

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

}  // namespace strata::train
