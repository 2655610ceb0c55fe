// model_sharding.h: what Mlp::Create checks and counts for one rank of a
// sharded run (model.h; model_sharding.cc builds the rest).
#ifndef STRATA_TRAIN_MODEL_MODEL_SHARDING_H_
#define STRATA_TRAIN_MODEL_MODEL_SHARDING_H_

#include "absl/status/status.h"
#include "train/comm/collectives.h"
#include "train/compute/compute.h"
#include "train/model/footprint.h"

namespace strata::train {

struct ModelConfig;  // model.h

// OK when `config` can be sharded over `collectives`' ranks on `compute`:
// InvalidArgument for a layer with fewer outputs than ranks (a rank would
// hold no shard of its bias);
// FailedPrecondition for a transport that does not fit the compute (a CUDA
// GPU takes NCCL, whose gathers move GPU memory; the CPU MPI or threads).
// FailedPrecondition also in unified memory (`device_memory` Stats'; the
// gather slots are device-home tensors, which it does not have).
// The checks every sharded model shares: the transport and unified memory,
// as above.
absl::Status CheckShardedDevice(const Compute& compute,
                                const Collectives& collectives,
                                const std::string& device_memory);

absl::Status CheckShardable(const ModelConfig& config, const Compute& compute,
                            const Collectives& collectives,
                            const std::string& device_memory);

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_MODEL_SHARDING_H_
