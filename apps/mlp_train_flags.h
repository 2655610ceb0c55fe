// mlp_train_flags.h: the MLP's side of `strata train`'s flags — its own
// flags (defined in mlp_train_flags.cc) and the run they describe, checked.
#ifndef STRATA_APPS_MLP_TRAIN_FLAGS_H_
#define STRATA_APPS_MLP_TRAIN_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "train/run/trainer.h"

ABSL_DECLARE_FLAG(std::string, data_dir);

namespace strata {

// The run from the flags (the shared ones: train_flags.h); InvalidArgument
// naming the first flag whose value is refused (the model's shape is
// checked later: train::ComputeFootprint).
absl::StatusOr<train::TrainOptions> MlpTrainOptionsFromFlags();

}  // namespace strata

#endif  // STRATA_APPS_MLP_TRAIN_FLAGS_H_
