// fault_spec.cc: FaultDraws, the seeded SplitMix64 stream behind every
// fault wrapper (policy in fault_spec.h).
#include "tiers/fault/fault_spec.h"

namespace strata {

void FaultDraws::Reset(const FaultSpec& spec) {
  state_ = spec.seed;
  matched_ = 0;
}

uint64_t FaultDraws::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool FaultDraws::NextFails(const FaultSpec& spec) {
  ++matched_;
  const double unit = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return unit < spec.rate || matched_ == spec.nth;
}

}  // namespace strata
