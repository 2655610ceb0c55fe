// clipped_adamw.cc: speculative AdamW updates with exact global-norm
// clipping (see clipped_adamw.h).
#include "train/model/clipped_adamw.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "strata/status.h"
#include "train/compute/cpu/half_cast.h"
#include "train/compute/half.h"
#include "train/model/lease_group.h"

namespace strata::train {
namespace {

constexpr uint64_t kF = sizeof(float);

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

uint64_t ParamGroup::backup_bytes() const {
  uint64_t bytes = 0;
  for (const ParamSlot& s : params) bytes += (s.mixed() ? 4 : 3) * s.bytes;
  return bytes;
}

ClippedAdamW::ClippedAdamW(Store* store, Compute* compute, Tier tier,
                           ClipOptions options,
                           const std::vector<TensorId>* retry_evictions)
    : store_(store),
      compute_(compute),
      tier_(tier),
      options_(options),
      retry_evictions_(retry_evictions) {}

void ClippedAdamW::BeginStep(const AdamParams& adam,
                             std::optional<float> known_coefficient,
                             std::optional<MixedStep> mixed) {
  adam_ = adam;
  known_coefficient_ = known_coefficient;
  mixed_ = mixed;
  sum_squares_ = 0;
  nonfinite_ = 0;
  speculated_.clear();
  deferred_.clear();
  // Clipping comes in runs, and a norm near the limit flips between the
  // sides: until kCleanStepsToSpeculate steps in a row stayed within it,
  // waiting for the norm costs less than the likely re-run.
  defer_ = steps_since_clip_ < kCleanStepsToSpeculate &&
           !known_coefficient.has_value() && options_.max_norm > 0;
}

absl::StatusOr<double> ClippedAdamW::PrepareGroup(const ParamGroup& group,
                                                  bool want_sum) {
  double sum = 0;
  bool cast = false;
  for (const ParamSlot& s : group.params) {
    if (!want_sum && !s.mixed()) continue;
    LeaseGroup g(store_, Tier::kDevice, compute_->stream(), retry_evictions_);
    const int i = g.Add(s.g, Access::kRead);
    const int h = s.mixed() ? g.Add(s.g16, Access::kOverwrite) : -1;
    STRATA_RETURN_IF_ERROR(g.Acquire());
    const int64_t n = static_cast<int64_t>(s.bytes / kF);
    if (s.mixed()) {
      STRATA_RETURN_IF_ERROR(
          compute_->CastToHalf(s.type, {}, g.data(i), g.half(h), n));
      cast = true;
    }
    double part = 0;
    if (want_sum) {
      STRATA_ASSIGN_OR_RETURN(part, compute_->SumOfSquares(g.data(i), n));
    }
    STRATA_RETURN_IF_ERROR(g.Release());
    // The sum never leaves the device: the 16-bit gradient goes on.
    if (s.mixed()) STRATA_RETURN_IF_ERROR(store_->Discard(s.g));
    // An fp32 slot of a mixed step has no cast to count it.
    if (mixed_.has_value() && !s.mixed() && !std::isfinite(part)) {
      ++nonfinite_;
    }
    sum += part;
  }
  if (cast) {
    STRATA_ASSIGN_OR_RETURN(const int64_t bad, compute_->TakeNonFinite());
    nonfinite_ += bad;
  }
  return sum;
}

absl::StatusOr<double> ClippedAdamW::GroupSum(
    const ParamGroup& group, const std::optional<WholeGradient>& whole) {
  if (!whole.has_value()) return PrepareGroup(group, /*want_sum=*/true);
  STRATA_RETURN_IF_ERROR(PrepareGroup(group, /*want_sum=*/false).status());
  if (mixed_.has_value()) nonfinite_ += whole->nonfinite;
  return whole->sum_squares;
}

double ClippedAdamW::Norm() const {
  // The scale is a power of two: unscaling the root is exact.
  return std::sqrt(sum_squares_) * (mixed_ ? mixed_->grad_scale : 1.0f);
}

absl::Status ClippedAdamW::GroupComplete(const ParamGroup& group,
                                         std::optional<WholeGradient> whole) {
  const bool clipping = options_.max_norm > 0;
  const bool mixed = mixed_.has_value();
  if (known_coefficient_.has_value() || (!clipping && !mixed)) {
    // A re-run recomputes the first run's finite gradients: no overflow.
    STRATA_RETURN_IF_ERROR(PrepareGroup(group, /*want_sum=*/false).status());
    STRATA_RETURN_IF_ERROR(
        UpdateGroup(group, /*backup=*/false, known_coefficient_.value_or(1)));
    return DiscardGradients(group);
  }
  // A mixed step sums every group: a non-finite fp32 gradient shows there.
  STRATA_ASSIGN_OR_RETURN(double part, GroupSum(group, whole));
  sum_squares_ += part;
  if (overflow()) return DiscardGradients(group);  // the step is skipped
  if (defer_) {  // updated at EndStep; the gradients wait
    deferred_.push_back(&group);
    return absl::OkStatus();
  }
  if (!clipping || Norm() <= options_.max_norm) {  // may stay within it
    STRATA_RETURN_IF_ERROR(UpdateGroup(group, /*backup=*/true, 1.0f));
    speculated_.push_back(&group);
  }
  return DiscardGradients(group);
}

absl::StatusOr<std::optional<float>> ClippedAdamW::EndStep(
    const ParamGroup& last, std::optional<WholeGradient> whole) {
  ++stats_.steps;
  const bool clipping = options_.max_norm > 0;
  if (known_coefficient_.has_value() || (!clipping && !mixed_.has_value())) {
    STRATA_RETURN_IF_ERROR(GroupComplete(last, whole));
    return std::nullopt;
  }
  STRATA_ASSIGN_OR_RETURN(double part, GroupSum(last, whole));
  sum_squares_ += part;
  // A rank may have stopped updating on a part of the norm (or its own
  // overflow): what follows decides on the whole, the same on every rank,
  // and restores whatever it speculated.
  if (agree_) STRATA_RETURN_IF_ERROR(agree_(sum_squares_, nonfinite_));
  if (overflow()) {
    // Skipped: nothing of this step may stay. The clip state is untouched
    // (the norm is not a number).
    --stats_.steps;
    STRATA_RETURN_IF_ERROR(DiscardGradients(last));
    for (const ParamGroup* g : deferred_) {
      STRATA_RETURN_IF_ERROR(DiscardGradients(*g));
    }
    for (const ParamGroup* g : speculated_) {
      STRATA_RETURN_IF_ERROR(RestoreGroup(*g));
    }
    speculated_.clear();
    deferred_.clear();
    return std::nullopt;
  }
  const double norm = Norm();
  stats_.last_norm = norm;
  const bool clipped = clipping && norm > options_.max_norm;
  steps_since_clip_ = clipped ? 0 : steps_since_clip_ + 1;
  // PyTorch's clip_grad_norm_: max_norm / (norm + 1e-6).
  const float coef =
      clipped ? static_cast<float>(options_.max_norm / (norm + 1e-6)) : 1.0f;
  if (defer_) {
    ++stats_.deferred;
    if (clipped) ++stats_.clipped;
    deferred_.push_back(&last);
    for (const ParamGroup* g : deferred_) {
      STRATA_RETURN_IF_ERROR(UpdateGroup(*g, /*backup=*/false, coef));
      STRATA_RETURN_IF_ERROR(DiscardGradients(*g));
    }
    return std::nullopt;
  }
  if (!clipped) {
    STRATA_RETURN_IF_ERROR(UpdateGroup(last, /*backup=*/false, 1.0f));
    STRATA_RETURN_IF_ERROR(DiscardGradients(last));
    // Confirmed: the backups are dead, and Discard never writes them back.
    for (const ParamGroup* g : speculated_) {
      STRATA_RETURN_IF_ERROR(store_->Discard(g->backup));
    }
    return std::nullopt;
  }
  STRATA_RETURN_IF_ERROR(DiscardGradients(last));
  --stats_.steps;  // the re-run counts it
  ++stats_.clipped;
  if (!speculated_.empty()) ++stats_.rolled_back;
  for (const ParamGroup* g : speculated_) {
    STRATA_RETURN_IF_ERROR(RestoreGroup(*g));
  }
  speculated_.clear();
  return coef;
}

absl::Status ClippedAdamW::UpdateGroup(const ParamGroup& group, bool backup,
                                       float coef) {
  uint64_t offset = 0;
  for (const ParamSlot& s : group.params) {
    STRATA_RETURN_IF_ERROR(UpdateSlot(s, group.backup, offset, backup, coef));
    offset += (s.mixed() ? 4 : 3) * s.bytes;
  }
  return absl::OkStatus();
}

absl::Status ClippedAdamW::UpdateSlot(const ParamSlot& slot, TensorId backup_id,
                                      uint64_t backup_offset, bool backup,
                                      float coef) {
  const bool on_device = tier_ == Tier::kDevice;
  const bool mixed = slot.mixed();
  LeaseGroup group(store_, tier_, on_device ? compute_->stream() : nullptr,
                   retry_evictions_);
  // The fp32 path scales its gradient in place; the fused pass folds it in.
  const float scale = coef * (mixed_ ? mixed_->grad_scale : 1.0f);
  const int g =
      mixed ? group.Add(slot.g16, Access::kRead)
            : group.Add(slot.g, scale != 1.0f ? Access::kWrite : Access::kRead);
  const int w = group.Add(slot.w, Access::kWrite);
  const int m = group.Add(slot.m, Access::kWrite);
  const int v = group.Add(slot.v, Access::kWrite);
  // The backup needs the 16-bit copy's contents; the update alone rewrites
  // it whole.
  const int w16 =
      mixed ? group.Add(slot.w16, backup ? Access::kWrite : Access::kOverwrite)
            : -1;
  // The first slot of a group starts the backup afresh.
  const int b =
      backup ? group.Add(backup_id, backup_offset == 0 ? Access::kOverwrite
                                                       : Access::kWrite)
             : -1;
  STRATA_RETURN_IF_ERROR(group.Acquire());
  const int64_t n = static_cast<int64_t>(slot.bytes / kF);
  const auto start = std::chrono::steady_clock::now();
  if (b >= 0) {
    float* dst = group.data(b) + backup_offset / kF;
    STRATA_RETURN_IF_ERROR(CopyOnTier(group.data(w), dst, n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(group.data(m), dst + n, n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(group.data(v), dst + 2 * n, n));
    if (mixed) {
      STRATA_RETURN_IF_ERROR(
          WidenOnTier(slot.type, group.half(w16), dst + 3 * n, n));
    }
    stats_.backup_bytes += (mixed ? 4 : 3) * slot.bytes;
  }
  const float decay = 1.0f - adam_.lr * options_.weight_decay;
  if (mixed) {
    MixedAdamParams mp;
    mp.type = slot.type;
    mp.grad_scale = scale;
    mp.decay = slot.decay ? decay : 1.0f;
    mp.rounding.rounding = mixed_->rounding;
    mp.rounding.seed = StochasticSeed(mixed_->seed, slot.tensor, mixed_->step);
    mp.rounding.first_index = slot.first_index;
    if (on_device) {
      STRATA_RETURN_IF_ERROR(compute_->AdamMixed(
          adam_, mp, group.data(w), group.data(m), group.data(v), group.half(g),
          group.half(w16), n));
    } else {
      AdamMixedUpdateCpu(adam_, mp, group.data(w), group.data(m), group.data(v),
                         group.half(g), group.half(w16), n);
    }
  } else if (on_device) {
    if (slot.decay) {
      STRATA_RETURN_IF_ERROR(compute_->Scale(group.data(w), decay, n));
    }
    if (scale != 1.0f) {
      STRATA_RETURN_IF_ERROR(compute_->Scale(group.data(g), scale, n));
    }
    STRATA_RETURN_IF_ERROR(compute_->Adam(adam_, group.data(w), group.data(m),
                                          group.data(v), group.data(g), n));
  } else {
    if (slot.decay) ScaleCpu(group.data(w), decay, n);
    if (scale != 1.0f) ScaleCpu(group.data(g), scale, n);
    AdamUpdateCpu(adam_, group.data(w), group.data(m), group.data(v),
                  group.data(g), n);
  }
  stats_.optimizer_seconds += Since(start);
  return group.Release();
}

absl::Status ClippedAdamW::RestoreGroup(const ParamGroup& group) {
  const bool on_device = tier_ == Tier::kDevice;
  uint64_t offset = 0;
  for (const ParamSlot& s : group.params) {
    LeaseGroup lg(store_, tier_, on_device ? compute_->stream() : nullptr,
                  retry_evictions_);
    const int b = lg.Add(group.backup, Access::kRead);
    const int w = lg.Add(s.w, Access::kOverwrite);
    const int m = lg.Add(s.m, Access::kOverwrite);
    const int v = lg.Add(s.v, Access::kOverwrite);
    const int w16 = s.mixed() ? lg.Add(s.w16, Access::kOverwrite) : -1;
    STRATA_RETURN_IF_ERROR(lg.Acquire());
    const int64_t n = static_cast<int64_t>(s.bytes / kF);
    const float* src = lg.data(b) + offset / kF;
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(CopyOnTier(src, lg.data(w), n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(src + n, lg.data(m), n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(src + 2 * n, lg.data(v), n));
    // A widened 16-bit value rounds back to itself.
    if (s.mixed()) {
      STRATA_RETURN_IF_ERROR(
          NarrowOnTier(s.type, src + 3 * n, lg.half(w16), n));
    }
    stats_.optimizer_seconds += Since(start);
    STRATA_RETURN_IF_ERROR(lg.Release());
    offset += (s.mixed() ? 4 : 3) * s.bytes;
  }
  return store_->Discard(group.backup);
}

absl::Status ClippedAdamW::CopyOnTier(const float* src, float* dst, int64_t n) {
  if (tier_ == Tier::kDevice) return compute_->Copy(src, dst, n);
  if (n > 0) std::memcpy(dst, src, n * kF);
  return absl::OkStatus();
}

absl::Status ClippedAdamW::WidenOnTier(Precision type, const uint16_t* src,
                                       float* dst, int64_t n) {
  if (tier_ == Tier::kDevice) return compute_->CastToFloat(type, src, dst, n);
  CastToFloatCpu(type, src, dst, n);
  return absl::OkStatus();
}

absl::Status ClippedAdamW::NarrowOnTier(Precision type, const float* src,
                                        uint16_t* dst, int64_t n) {
  if (tier_ == Tier::kDevice)
    return compute_->CastToHalf(type, {}, src, dst, n);
  CastToHalfCpu(type, {}, src, dst, n);
  return absl::OkStatus();
}

absl::Status ClippedAdamW::DiscardGradients(const ParamGroup& group) {
  for (const ParamSlot& s : group.params) {
    STRATA_RETURN_IF_ERROR(store_->Discard(s.mixed() ? s.g16 : s.g));
  }
  return absl::OkStatus();
}

}  // namespace strata::train
