// precision_flags.h: `strata train`'s mixed-precision flags (--precision,
// --rounding, --loss-scale) and their checks.
#ifndef STRATA_APPS_CLI_PRECISION_FLAGS_H_
#define STRATA_APPS_CLI_PRECISION_FLAGS_H_

#include "absl/status/status.h"
#include "train/compute/precision.h"
#include "train/model/loss_scale.h"

namespace strata {

// Sets precision, rounding and loss_scale.initial_scale from the flags.
// InvalidArgument naming the flag for an unknown value, a loss scale that
// is not a power of two in [1, 2^24], or one that differs from the default
// without --precision=fp16. (By value, not by whether it was given: a report
// replayed with --config carries the default for any run.)
absl::Status PrecisionFromFlags(train::Precision& precision,
                                train::Rounding& rounding,
                                train::LossScaleOptions& loss_scale);

// The same for a model's config (train::ModelConfig, train::GptConfig).
template <typename Config>
absl::Status PrecisionFromFlags(Config& c) {
  return PrecisionFromFlags(c.precision, c.rounding, c.loss_scale);
}

}  // namespace strata

#endif  // STRATA_APPS_CLI_PRECISION_FLAGS_H_
