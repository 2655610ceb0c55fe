// activation_meter.h: ActivationMeter, the bytes of activation tensors that
// hold contents at once — what activation checkpointing and gradient
// accumulation trade against recomputation and link bytes.
//
// A model tells the meter when an activation gets contents (a lease that
// overwrote or wrote it was released: Produced) and when it loses them (it
// was discarded: Dropped); the meter keeps the live sum and its peak.
// LeaseGroup reports its writes to a meter it is given (lease_group.h), so a
// model only registers its activation tensors and routes their discards
// here. Ids it was never told of are ignored: parameters and gradients pass
// through the same groups.
//
// Thread safety: none; one model's step drives it.
#ifndef STRATA_TRAIN_MODEL_ACTIVATION_METER_H_
#define STRATA_TRAIN_MODEL_ACTIVATION_METER_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "strata/tensor.h"

namespace strata::train {

class ActivationMeter {
 public:
  // `id` is an activation of `bytes` bytes (its whole size).
  void Track(TensorId id, uint64_t bytes) { sizes_[id] = bytes; }
  // `id` now holds contents: its tracked size (ignored when untracked).
  void Produced(TensorId id);
  // `id` now holds `bytes` bytes of contents (a partial batch).
  void Produced(TensorId id, uint64_t bytes);
  // `id` holds nothing any more (discarded); no-op when it held nothing.
  void Dropped(TensorId id);

  uint64_t live_bytes() const { return live_bytes_; }
  // The most live bytes at once since construction.
  uint64_t peak_bytes() const { return peak_bytes_; }

 private:
  absl::flat_hash_map<TensorId, uint64_t> sizes_;  // tracked activations
  absl::flat_hash_map<TensorId, uint64_t> live_;   // holding contents
  uint64_t live_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_MODEL_ACTIVATION_METER_H_
