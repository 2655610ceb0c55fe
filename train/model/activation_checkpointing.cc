// activation_checkpointing.cc: names of the checkpointing modes.
#include "train/model/activation_checkpointing.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace strata::train {

const char* ActivationCheckpointingName(ActivationCheckpointing mode) {
  switch (mode) {
    case ActivationCheckpointing::kNone:
      return "none";
    case ActivationCheckpointing::kBlock:
      return "block";
    case ActivationCheckpointing::kOffload:
      return "offload";
  }
  return "unknown";
}

absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(
    std::string_view name) {
  for (ActivationCheckpointing mode :
       {ActivationCheckpointing::kNone, ActivationCheckpointing::kBlock,
        ActivationCheckpointing::kOffload}) {
    if (name == ActivationCheckpointingName(mode)) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--checkpoint=", std::string(name), ": choose none, block or offload"));
}

absl::Status CheckCheckpointingHome(ActivationCheckpointing mode, Tier home) {
  if (mode != ActivationCheckpointing::kOffload || home != Tier::kDevice) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "--checkpoint=offload moves kept activations to the host tier, which a "
      "resident run does not use: use --checkpoint=block with --resident");
}

}  // namespace strata::train
