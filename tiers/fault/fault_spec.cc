// fault_spec.cc: FaultDraws, the seeded SplitMix64 stream behind every
// fault wrapper (policy in fault_spec.h).
#include "tiers/fault/fault_spec.h"

#include "base/splitmix64.h"

namespace strata {

void FaultDraws::Reset(const FaultSpec& spec) {
  state_ = spec.seed;
  matched_ = 0;
}

uint64_t FaultDraws::Next() { return SplitMix64Next(state_); }

bool FaultDraws::NextFails(const FaultSpec& spec) {
  ++matched_;
  const double unit = static_cast<double>(Next() >> 11) * 0x1.0p-53;
  return unit < spec.rate || matched_ == spec.nth ||
         (spec.from != 0 && matched_ >= spec.from);
}

}  // namespace strata
