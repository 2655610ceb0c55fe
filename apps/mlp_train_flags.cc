// mlp_train_flags.cc: the MLP's own flags of `strata train` and the run they
// describe (see mlp_train_flags.h).
#include "apps/mlp_train_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/cli/precision_flags.h"
#include "apps/train_flags.h"
#include "strata/status.h"
#include "strata/store.h"
#include "train/data/dataset.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/model.h"

ABSL_FLAG(int64_t, width, 1024, "Units per hidden layer.");
ABSL_FLAG(int32_t, depth, 5,
          "Hidden layers (the model has depth + 1 Linear "
          "layers: 784 -> width x depth -> 10).");
ABSL_FLAG(int32_t, epochs, 5, "Passes over the 60000 images.");
ABSL_FLAG(std::string, activation, "relu", "relu or gelu.");
ABSL_FLAG(std::string, data_dir, strata::train::kFashionMnistDir,
          "Directory with the Fashion-MNIST IDX files "
          "(train-images-idx3-ubyte.gz, ...; Debian package "
          "dataset-fashion-mnist).");

namespace strata {

absl::StatusOr<train::TrainOptions> MlpTrainOptionsFromFlags() {
  train::TrainOptions o;
  train::ModelConfig& m = o.model;
  m.width = absl::GetFlag(FLAGS_width);
  m.depth = absl::GetFlag(FLAGS_depth);
  m.batch = absl::GetFlag(FLAGS_batch);
  m.accumulate = absl::GetFlag(FLAGS_accumulate);
  STRATA_ASSIGN_OR_RETURN(m.checkpoint, train::ParseActivationCheckpointing(
                                            absl::GetFlag(FLAGS_checkpoint)));
  STRATA_RETURN_IF_ERROR(PrecisionFromFlags(m));
  m.seed = absl::GetFlag(FLAGS_seed);
  o.shuffle_seed = m.seed;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(lr >= 1e-30 && lr < 1)) {  // a normal float, below 1
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be in [1e-30, 1)", lr));
  }
  m.adam.lr = static_cast<float>(lr);
  if (o.epochs < 1 || o.max_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--epochs=%d --max-steps=%d: need epochs >= 1 and max-steps >= 0",
        o.epochs, o.max_steps));
  }
  const std::string schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (schedule != "cosine" && schedule != "constant") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr-schedule=%s: use cosine or constant", schedule));
  }
  o.cosine_schedule = schedule == "cosine";
  const std::string act = absl::GetFlag(FLAGS_activation);
  if (act == "relu") {
    m.activation = train::Activation::kRelu;
  } else if (act == "gelu") {
    m.activation = train::Activation::kGelu;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--activation=%s: use relu or gelu", act));
  }
  const std::string opt = absl::GetFlag(FLAGS_optimizer_tier);
  if (opt == "host") {
    m.optimizer_tier = Tier::kHost;
  } else if (opt == "device") {
    m.optimizer_tier = Tier::kDevice;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--optimizer-tier=%s: use host or device", opt));
  }
  return o;
}

}  // namespace strata
