// precision_flags.h: `strata train`'s mixed-precision flags (--precision,
// --rounding, --loss-scale) and their checks.
#ifndef STRATA_APPS_PRECISION_FLAGS_H_
#define STRATA_APPS_PRECISION_FLAGS_H_

#include "absl/status/status.h"
#include "train/model.h"

namespace strata {

// Sets m.precision, m.rounding and m.loss_scale.initial_scale from the
// flags. InvalidArgument naming the flag for an unknown value, a loss scale
// that is not a power of two in [1, 2^24], or one that differs from the
// default without --precision=fp16. (By value, not by whether it was given:
// a report replayed with --config carries the default for any run.)
absl::Status PrecisionFromFlags(train::ModelConfig& m);

// The GPT trains in fp32 only so far: InvalidArgument when any of the three
// flags asks for anything else, rather than a run of another model than
// asked for.
absl::Status RefuseMixedPrecision();

}  // namespace strata

#endif  // STRATA_APPS_PRECISION_FLAGS_H_
