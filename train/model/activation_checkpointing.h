// activation_checkpointing.h: what a model keeps from its forward pass for
// the backward pass (activation checkpointing; Chen et al., 2016, "Training
// Deep Nets with Sublinear Memory Cost").
#ifndef STRATA_TRAIN_MODEL_ACTIVATION_CHECKPOINTING_H_
#define STRATA_TRAIN_MODEL_ACTIVATION_CHECKPOINTING_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "strata/tensor.h"

namespace strata::train {

enum class ActivationCheckpointing : uint8_t {
  // Every saved activation stays in the store until backward uses it.
  kNone,
  // Only each block's input is kept (an MLP layer's input, a GPT block's
  // residual stream); backward recomputes the rest of the block from it.
  // Recomputing runs the same operations on the same inputs, so the results
  // are bitwise those of kNone.
  kBlock,
  // kBlock, and the kept inputs leave the device for the host tier as soon as
  // forward has used them, so the scheduler brings them back in backward
  // order (it has the order from the step's trace).
  kOffload,
};

// "none", "block" or "offload".
const char* ActivationCheckpointingName(ActivationCheckpointing mode);

// The mode `name` spells (as ActivationCheckpointingName); InvalidArgument
// naming the choices otherwise.
absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(
    std::string_view name);

// OK unless `mode` is kOffload and the model's tensors live on the device
// (`home` kDevice: a resident run, with no host tier to offload to);
// InvalidArgument naming the flags then.
absl::Status CheckCheckpointingHome(ActivationCheckpointing mode, Tier home);

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_ACTIVATION_CHECKPOINTING_H_
