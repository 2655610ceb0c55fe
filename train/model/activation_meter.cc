// activation_meter.cc: the live and peak activation bytes (see
// activation_meter.h).
#include "train/model/activation_meter.h"

#include <algorithm>

namespace strata::train {

void ActivationMeter::Produced(TensorId id) {
  if (auto it = sizes_.find(id); it != sizes_.end()) Produced(id, it->second);
}

void ActivationMeter::Produced(TensorId id, uint64_t bytes) {
  auto [it, inserted] = live_.try_emplace(id, bytes);
  if (!inserted) return;  // already live: a write in place
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

void ActivationMeter::Dropped(TensorId id) {
  if (auto it = live_.find(id); it != live_.end()) {
    live_bytes_ -= it->second;
    live_.erase(it);
  }
}

}  // namespace strata::train
