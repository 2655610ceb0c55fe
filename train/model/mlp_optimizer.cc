// mlp_optimizer.cc: the Mlp's Adam updates, part by part through each
// parameter's optimizer state (model.h, optimizer_parts.h).
//
// Leased: the gradient and the weight are leased whole on the optimizer's
// tier and each part of the moments (and master weights) beside them in
// turn; a parameter of one part takes all its leases in one group, as one
// update. Streamed (host optimizer, host budget below a whole weight's
// working set): the gradient and the weight stay leased on the device, where
// backward left them, and each part crosses to the host through two
// part-sized staging tensors (Lease::CopyOut), is updated beside its
// moments, and its new weights cross back (Lease::CopyIn). The host then
// holds four parts at once whatever the layer's width. Both give the bits of
// one whole update: Adam is elementwise, and stochastic rounding is seeded
// per element index (RoundingMode::first_index).
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "strata/status.h"
#include "train/compute/half.h"
#include "train/model/lease_group.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);

}  // namespace

absl::StatusOr<Mlp::OptimizerState> Mlp::CreateOptimizerState(
    const std::string& base, const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  OptimizerState s;
  s.parts = OptimizerParts(elements);
  const int n = static_cast<int>(s.parts.size());
  auto make = [&](const std::string& suffix, std::vector<TensorId>& ids) {
    for (int k = 0; k < n; ++k) {
      STRATA_ASSIGN_OR_RETURN(
          TensorId id,
          CreateTensor(
              OptimizerPartName(absl::StrCat(base, suffix), k, n),
              TensorKind::kOptimizerState, DType::kFloat32,
              n == 1 ? shape : std::vector<int64_t>{s.parts[k].count}));
      ids.push_back(id);
    }
    return absl::OkStatus();
  };
  if (mixed()) STRATA_RETURN_IF_ERROR(make(".master", s.master));
  STRATA_RETURN_IF_ERROR(make(".adam_m", s.m));
  STRATA_RETURN_IF_ERROR(make(".adam_v", s.v));
  return s;
}

absl::Status Mlp::AdamOn(const AdamParams& p, const OptimizerState& s,
                         TensorId g, TensorId w, uint64_t tensor) {
  STRATA_RETURN_IF_ERROR(stream_optimizer_ ? AdamStreamed(p, s, g, w, tensor)
                                           : AdamLeased(p, s, g, w, tensor));
  return store_->Discard(g);  // the gradient is dead until next backward
}

absl::Status Mlp::UpdatePart(const AdamParams& p, float* w, float* m, float* v,
                             const void* g, uint16_t* w16, int64_t first,
                             int64_t n, uint64_t tensor, bool on_device) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status;
  if (mixed()) {
    MixedAdamParams mp;
    mp.type = config_.precision;
    mp.grad_scale = loss_scale_ ? loss_scale_->inverse_scale() : 1.0f;
    mp.rounding.rounding = config_.rounding;
    mp.rounding.seed = StochasticSeed(config_.seed, tensor, steps_);
    mp.rounding.first_index = first;
    const auto* g16 = static_cast<const uint16_t*>(g);
    if (on_device) {
      status = compute_->AdamMixed(p, mp, w, m, v, g16, w16, n);
    } else {
      AdamMixedUpdateCpu(p, mp, w, m, v, g16, w16, n);
    }
  } else if (on_device) {
    status = compute_->Adam(p, w, m, v, static_cast<const float*>(g), n);
  } else {
    AdamUpdateCpu(p, w, m, v, static_cast<const float*>(g), n);
  }
  optimizer_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

absl::Status Mlp::AdamLeased(const AdamParams& p, const OptimizerState& s,
                             TensorId g_id, TensorId w_id, uint64_t tensor) {
  const Tier T = config_.optimizer_tier;
  const bool on_device = T == Tier::kDevice;
  void* const stream = on_device ? compute_->stream() : nullptr;
  LeaseGroup whole(store_, T, stream, &created_);
  const int g = whole.Add(g_id, Access::kRead);
  // Mixed: every element of the 16-bit copy is rewritten from its master.
  const int w = whole.Add(w_id, mixed() ? Access::kOverwrite : Access::kWrite);
  const bool one = s.parts.size() == 1;
  std::optional<LeaseGroup> part_group;
  for (size_t k = 0; k < s.parts.size(); ++k) {
    LeaseGroup& pg =
        one ? whole : part_group.emplace(store_, T, stream, &created_);
    const int m = pg.Add(s.m[k], Access::kWrite);
    const int v = pg.Add(s.v[k], Access::kWrite);
    const int master = mixed() ? pg.Add(s.master[k], Access::kWrite) : -1;
    if (k == 0) STRATA_RETURN_IF_ERROR(whole.Acquire());
    if (!one) STRATA_RETURN_IF_ERROR(pg.Acquire());
    const OptimizerPart& part = s.parts[k];
    // The elementwise update's operands, `part.first` elements in.
    const void* gp = mixed()
                         ? static_cast<const void*>(whole.half(g) + part.first)
                         : whole.data(g) + part.first;
    float* const wp = mixed() ? pg.data(master) : whole.data(w) + part.first;
    uint16_t* const w16 = mixed() ? whole.half(w) + part.first : nullptr;
    STRATA_RETURN_IF_ERROR(UpdatePart(p, wp, pg.data(m), pg.data(v), gp, w16,
                                      s.first_index + part.first, part.count,
                                      tensor, on_device));
    if (!one) STRATA_RETURN_IF_ERROR(pg.Release());
  }
  return whole.Release();
}

absl::Status Mlp::AdamStreamed(const AdamParams& p, const OptimizerState& s,
                               TensorId g_id, TensorId w_id, uint64_t tensor) {
  void* const stream = compute_->stream();
  LeaseGroup device(store_, Tier::kDevice, stream, &created_);
  const int g = device.Add(g_id, Access::kRead);
  const int w = device.Add(w_id, mixed() ? Access::kOverwrite : Access::kWrite);
  STRATA_RETURN_IF_ERROR(device.Acquire());
  // Bytes per element of the device's gradient and weight.
  const uint64_t e = mixed() ? sizeof(uint16_t) : kF;
  for (size_t k = 0; k < s.parts.size(); ++k) {
    const OptimizerPart& part = s.parts[k];
    LeaseGroup host(store_, Tier::kHost, nullptr, &created_);
    const int m = host.Add(s.m[k], Access::kWrite);
    const int v = host.Add(s.v[k], Access::kWrite);
    const int master = mixed() ? host.Add(s.master[k], Access::kWrite) : -1;
    const int sg = host.Add(stage_g_, Access::kOverwrite);
    const int sw = host.Add(stage_w_, Access::kOverwrite);
    STRATA_RETURN_IF_ERROR(host.Acquire());
    const uint64_t at = part.first * e, bytes = part.count * e;
    STRATA_RETURN_IF_ERROR(
        device.lease(g).CopyOut(at, host.data(sg), bytes, stream));
    if (!mixed()) {  // the weight itself is what Adam updates
      STRATA_RETURN_IF_ERROR(
          device.lease(w).CopyOut(at, host.data(sw), bytes, stream));
    }
    float* const wp = mixed() ? host.data(master) : host.data(sw);
    uint16_t* const w16 = mixed() ? host.half(sw) : nullptr;
    STRATA_RETURN_IF_ERROR(UpdatePart(p, wp, host.data(m), host.data(v),
                                      host.data(sg), w16, part.first,
                                      part.count, tensor, false));
    STRATA_RETURN_IF_ERROR(
        device.lease(w).CopyIn(at, host.data(sw), bytes, stream));
    STRATA_RETURN_IF_ERROR(host.Release());
    // Scratch: dead once copied; never written back.
    STRATA_RETURN_IF_ERROR(store_->Discard(stage_g_));
    STRATA_RETURN_IF_ERROR(store_->Discard(stage_w_));
  }
  return device.Release();
}

}  // namespace strata::train
