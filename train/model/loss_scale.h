// loss_scale.h: DynamicLossScale, the loss scale of fp16 training
// (Micikevicius et al., "Mixed precision training", ICLR 2018).
//
// fp16 gradients below 2^-24 flush to zero; multiplying the loss by S
// before backward lifts them into range, and the optimizer unscales by 1/S
// (folded into the fused Adam pass, cpu_adam.h). S is a power of two, so
// scaling and unscaling are exact (barring underflow). A step whose scaled
// gradients overflow (a non-finite count from the casts, half_cast.h) is
// skipped and S halved; after growth_interval clean steps in a row S
// doubles; S never falls below min_scale. The policy of PyTorch's
// GradScaler and Apex's dynamic scaler, with DeepSpeed's floor.
//
// Thread safety: none; one optimizer drives it.
#ifndef STRATA_TRAIN_MODEL_LOSS_SCALE_H_
#define STRATA_TRAIN_MODEL_LOSS_SCALE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace strata::train {

struct LossScaleOptions {
  // The first scale. Default: 2^16. A power of two, >= min_scale.
  float initial_scale = 65536.0f;
  // Clean steps in a row after which the scale doubles. Default: 1000.
  int64_t growth_interval = 1000;
  // The floor; an overflow at the floor skips the step and keeps it.
  // Default: 1. A power of two.
  float min_scale = 1.0f;
  // The ceiling, so doubling can never reach infinity. Default: 2^24.
  float max_scale = 16777216.0f;
};

// One change of the scale: from step `step` on, the loss is multiplied by
// `scale`. The first entry is the initial scale at step 0.
struct LossScaleChange {
  int64_t step = 0;
  float scale = 0;
};

class DynamicLossScale {
 public:
  // InvalidArgument, naming the option to change, unless the scales are
  // powers of two with min <= initial <= max and growth_interval >= 1.
  static absl::StatusOr<DynamicLossScale> Create(
      const LossScaleOptions& options = {});

  // The factor to multiply the loss by this step.
  float scale() const { return scale_; }
  // 1 / scale(), exact: what the optimizer multiplies gradients by.
  float inverse_scale() const { return 1.0f / scale_; }

  // Records the outcome of step `step` (increasing): `nonfinite` gradient
  // elements seen. Returns true when the step's update should be applied
  // (no overflow), false when it must be skipped. Halves or doubles the
  // scale for the next step as the policy says, recording each change.
  bool Update(int64_t step, int64_t nonfinite);

  int64_t skipped_steps() const { return skipped_steps_; }
  // Every change, oldest first, starting with the initial scale. It grows
  // by at most one entry per step that overflows or completes an interval.
  const std::vector<LossScaleChange>& history() const { return history_; }

  // What decides the following steps, for a checkpoint.
  struct State {
    float scale = 0;
    int64_t clean_steps = 0;
    int64_t skipped_steps = 0;
    std::vector<LossScaleChange> history;
  };
  State state() const {
    return {scale_, clean_steps_, skipped_steps_, history_};
  }
  // Continues from `state` (a resumed run). InvalidArgument, leaving this
  // unchanged, unless its scale is a power of two within the options' bounds,
  // its counts are >= 0 and clean_steps < growth_interval.
  absl::Status Restore(const State& state);

 private:
  explicit DynamicLossScale(const LossScaleOptions& options);
  void SetScale(int64_t step, float scale);

  // Constant after construction.
  LossScaleOptions options_;

  float scale_;
  int64_t clean_steps_ = 0;  // since the last overflow or growth
  int64_t skipped_steps_ = 0;
  std::vector<LossScaleChange> history_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_LOSS_SCALE_H_
