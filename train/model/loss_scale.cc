// loss_scale.cc: the dynamic loss-scale policy of loss_scale.h.
#include "train/model/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace strata::train {
namespace {

bool PowerOfTwo(float x) {
  int exp = 0;
  return std::isfinite(x) && x > 0 && std::frexp(x, &exp) == 0.5f;
}

}  // namespace

absl::StatusOr<DynamicLossScale> DynamicLossScale::Create(
    const LossScaleOptions& options) {
  for (const auto& [name, value] :
       {std::pair{"initial_scale", options.initial_scale},
        std::pair{"min_scale", options.min_scale},
        std::pair{"max_scale", options.max_scale}}) {
    if (!PowerOfTwo(value)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loss scale %s = %g is not a power of two: unscaling by its "
          "inverse would round; use e.g. 65536",
          name, value));
    }
  }
  if (options.min_scale > options.initial_scale ||
      options.initial_scale > options.max_scale) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "loss scale needs min_scale <= initial_scale <= max_scale, got %g, "
        "%g, %g",
        options.min_scale, options.initial_scale, options.max_scale));
  }
  if (options.growth_interval < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "loss scale growth_interval = %d: it must be at least 1 step",
        options.growth_interval));
  }
  return DynamicLossScale(options);
}

DynamicLossScale::DynamicLossScale(const LossScaleOptions& options)
    : options_(options), scale_(options.initial_scale) {
  history_.push_back({0, scale_});
}

void DynamicLossScale::SetScale(int64_t step, float scale) {
  if (scale == scale_) return;
  scale_ = scale;
  // Takes effect from the next step on.
  history_.push_back({step + 1, scale_});
}

bool DynamicLossScale::Update(int64_t step, int64_t nonfinite) {
  if (nonfinite > 0) {
    ++skipped_steps_;
    clean_steps_ = 0;
    SetScale(step, std::max(scale_ * 0.5f, options_.min_scale));
    return false;
  }
  if (++clean_steps_ >= options_.growth_interval) {
    clean_steps_ = 0;
    SetScale(step, std::min(scale_ * 2.0f, options_.max_scale));
  }
  return true;
}

absl::Status DynamicLossScale::Restore(const State& state) {
  if (!PowerOfTwo(state.scale) || state.scale < options_.min_scale ||
      state.scale > options_.max_scale || state.clean_steps < 0 ||
      state.clean_steps >= options_.growth_interval ||
      state.skipped_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "loss scale state (scale %g, %d clean steps, %d skipped) does not "
        "fit the loss-scale options (scale %g..%g, growth every %d steps): a "
        "damaged checkpoint, or one saved with other --loss-scale options",
        state.scale, state.clean_steps, state.skipped_steps, options_.min_scale,
        options_.max_scale, options_.growth_interval));
  }
  scale_ = state.scale;
  clean_steps_ = state.clean_steps;
  skipped_steps_ = state.skipped_steps;
  history_ = state.history;
  return absl::OkStatus();
}

}  // namespace strata::train
