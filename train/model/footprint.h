// footprint.h: the bytes an Mlp needs, computed from its ModelConfig before
// anything is created, and the check that a store's budgets can hold them.
//
// ModelFootprint counts each kind of tensor and the working sets the model's
// operations hold under leases at once; CheckFootprintFits compares those with
// the tier capacities in the store's Stats, so a model that cannot train is
// refused with the flag to raise instead of failing on a lease mid-step.
#ifndef STRATA_TRAIN_MODEL_FOOTPRINT_H_
#define STRATA_TRAIN_MODEL_FOOTPRINT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/stats.h"

namespace strata::train {

struct ModelConfig;  // model.h

// Bytes of each kind of tensor the model creates, for reports and budgets.
struct ModelFootprint {
  uint64_t parameter_bytes = 0;  // weights and biases
  uint64_t gradient_bytes = 0;
  uint64_t optimizer_bytes = 0;   // both Adam moments
  uint64_t activation_bytes = 0;  // inputs, labels, saved activations, grads
  // Copies of weights and moments kept while an update is unconfirmed (the
  // GPT's rollback backups, clipped_adamw.h).
  uint64_t backup_bytes = 0;
  // The most bytes one operation holds under device leases at once; the
  // device budget must exceed it.
  uint64_t device_working_set_bytes = 0;
  // The same for the optimizer tier (weight, gradient, one part of each
  // moment; optimizer_parts.h).
  uint64_t optimizer_working_set_bytes = 0;
  // The host's working set when the host optimizer streams (Mlp, model.h):
  // one part of each moment (and master weight), a part of the gradient and
  // one of the weight; 0 for models that do not stream.
  uint64_t streamed_optimizer_bytes = 0;
  // The largest optimizer part, in fp32 bytes.
  uint64_t largest_part_bytes = 0;
  uint64_t largest_tensor_bytes = 0;
  // The largest tensor leased on the device (0: largest_tensor_bytes).
  uint64_t largest_device_tensor_bytes = 0;
  // One rank of a sharded run: the two gather slots (the largest layer's
  // full parameters and gradients, each), part of the device working set.
  uint64_t gather_slot_bytes = 0;
  uint64_t state_bytes() const {  // weights, gradients, Adam moments
    return parameter_bytes + gradient_bytes + optimizer_bytes;
  }
  uint64_t total_bytes() const {
    return state_bytes() + activation_bytes + backup_bytes;
  }
};

// The footprint of `config` without creating anything. InvalidArgument for
// sizes that make no sense (zero or negative, depth < 1, > 1e9 elements in a
// tensor). `sharded_ranks` > 0: one rank of a run sharded over that many
// ranks (model_sharding.cc): the largest shard of every parameter, gradient
// and moment, and a device working set of the gather slots plus one layer's
// activations (ZeRO-3: a layer's full parameters exist only while it runs).
absl::StatusOr<ModelFootprint> ComputeFootprint(const ModelConfig& config,
                                                int sharded_ranks = 0);

// OK when the tiers in `stats` can run a model of footprint `f`: the device
// (and the optimizer's tier, and in unified memory the host) hold their
// working sets with room to place them beside leased copies, and the home
// tier holds every tensor. ResourceExhausted otherwise, naming the budget
// flag to raise and the bytes it needs.
absl::Status CheckFootprintFits(const Stats& stats, const ModelConfig& config,
                                const ModelFootprint& f);

// Whether the host optimizer should stream its updates (Mlp): it runs on the
// host tier, device memory is copies (not unified), and the host's budget
// holds the streamed working set but not the whole one. The choice changes
// only what crosses the links, never a bit of the result.
bool StreamsOptimizer(const Stats& stats, const ModelConfig& config,
                      const ModelFootprint& f);

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_FOOTPRINT_H_
