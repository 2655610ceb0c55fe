// clipped_adamw.cc: speculative AdamW updates with exact global-norm
// clipping (see clipped_adamw.h).
#include "train/clipped_adamw.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "strata/status.h"
#include "train/lease_group.h"

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
  for (const ParamSlot& s : params) bytes += 3 * s.bytes;
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
                             std::optional<float> known_coefficient) {
  adam_ = adam;
  known_coefficient_ = known_coefficient;
  sum_squares_ = 0;
  speculated_.clear();
  deferred_.clear();
  // Clipping comes in runs, and a norm near the limit flips between the
  // sides: until kCleanStepsToSpeculate steps in a row stayed within it,
  // waiting for the norm costs less than the likely re-run.
  defer_ = steps_since_clip_ < kCleanStepsToSpeculate &&
           !known_coefficient.has_value() && options_.max_norm > 0;
}

absl::StatusOr<double> ClippedAdamW::GroupSumOfSquares(
    const ParamGroup& group) {
  double sum = 0;
  for (const ParamSlot& s : group.params) {
    LeaseGroup g(store_, Tier::kDevice, compute_->stream(), retry_evictions_);
    const int i = g.Add(s.g, Access::kRead);
    STRATA_RETURN_IF_ERROR(g.Acquire());
    STRATA_ASSIGN_OR_RETURN(double part,
                            compute_->SumOfSquares(g.data(i), s.bytes / kF));
    STRATA_RETURN_IF_ERROR(g.Release());
    sum += part;
  }
  return sum;
}

absl::Status ClippedAdamW::GroupComplete(const ParamGroup& group) {
  const bool clipping = options_.max_norm > 0;
  if (known_coefficient_.has_value() || !clipping) {
    STRATA_RETURN_IF_ERROR(
        UpdateGroup(group, /*backup=*/false, known_coefficient_.value_or(1)));
    return DiscardGradients(group);
  }
  STRATA_ASSIGN_OR_RETURN(double part, GroupSumOfSquares(group));
  sum_squares_ += part;
  if (defer_) {  // updated at EndStep; the gradients wait
    deferred_.push_back(&group);
    return absl::OkStatus();
  }
  const double limit = options_.max_norm;
  if (std::sqrt(sum_squares_) <= limit) {  // may still stay within it
    STRATA_RETURN_IF_ERROR(UpdateGroup(group, /*backup=*/true, 1.0f));
    speculated_.push_back(&group);
  }
  return DiscardGradients(group);
}

absl::StatusOr<std::optional<float>> ClippedAdamW::EndStep(
    const ParamGroup& last) {
  ++stats_.steps;
  if (known_coefficient_.has_value() || options_.max_norm <= 0) {
    STRATA_RETURN_IF_ERROR(GroupComplete(last));
    return std::nullopt;
  }
  STRATA_ASSIGN_OR_RETURN(double part, GroupSumOfSquares(last));
  sum_squares_ += part;
  const double norm = std::sqrt(sum_squares_);
  stats_.last_norm = norm;
  const bool clipped = norm > options_.max_norm;
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
    offset += 3 * s.bytes;
  }
  return absl::OkStatus();
}

absl::Status ClippedAdamW::UpdateSlot(const ParamSlot& slot, TensorId backup_id,
                                      uint64_t backup_offset, bool backup,
                                      float coef) {
  const bool on_device = tier_ == Tier::kDevice;
  LeaseGroup group(store_, tier_, on_device ? compute_->stream() : nullptr,
                   retry_evictions_);
  const int g =
      group.Add(slot.g, coef != 1.0f ? Access::kWrite : Access::kRead);
  const int w = group.Add(slot.w, Access::kWrite);
  const int m = group.Add(slot.m, Access::kWrite);
  const int v = group.Add(slot.v, Access::kWrite);
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
    stats_.backup_bytes += 3 * slot.bytes;
  }
  const float decay = 1.0f - adam_.lr * options_.weight_decay;
  if (on_device) {
    if (slot.decay) {
      STRATA_RETURN_IF_ERROR(compute_->Scale(group.data(w), decay, n));
    }
    if (coef != 1.0f) {
      STRATA_RETURN_IF_ERROR(compute_->Scale(group.data(g), coef, n));
    }
    STRATA_RETURN_IF_ERROR(compute_->Adam(adam_, group.data(w), group.data(m),
                                          group.data(v), group.data(g), n));
  } else {
    if (slot.decay) ScaleCpu(group.data(w), decay, n);
    if (coef != 1.0f) ScaleCpu(group.data(g), coef, n);
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
    STRATA_RETURN_IF_ERROR(lg.Acquire());
    const int64_t n = static_cast<int64_t>(s.bytes / kF);
    const float* src = lg.data(b) + offset / kF;
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(CopyOnTier(src, lg.data(w), n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(src + n, lg.data(m), n));
    STRATA_RETURN_IF_ERROR(CopyOnTier(src + 2 * n, lg.data(v), n));
    stats_.optimizer_seconds += Since(start);
    STRATA_RETURN_IF_ERROR(lg.Release());
    offset += 3 * s.bytes;
  }
  return store_->Discard(group.backup);
}

absl::Status ClippedAdamW::CopyOnTier(const float* src, float* dst, int64_t n) {
  if (tier_ == Tier::kDevice) return compute_->Copy(src, dst, n);
  if (n > 0) std::memcpy(dst, src, n * kF);
  return absl::OkStatus();
}

absl::Status ClippedAdamW::DiscardGradients(const ParamGroup& group) {
  for (const ParamSlot& s : group.params) {
    STRATA_RETURN_IF_ERROR(store_->Discard(s.g));
  }
  return absl::OkStatus();
}

}  // namespace strata::train
