// plan_model.h: the residency planner's working model of a step — the
// gaps between consecutive uses of each tensor, the versions of its
// contents, each upper tier's capacity profile, and the cost of a set of
// placements — shared by the planner's phases (plan_placement.cc,
// plan_timing.cc, planner.cc). Internal to scheduler/.
//
// Thread safety: none; owned by one planning call.
#ifndef STRATA_SCHEDULER_PLAN_MODEL_H_
#define STRATA_SCHEDULER_PLAN_MODEL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "scheduler/capacity_profile.h"
#include "scheduler/residency_plan.h"

namespace strata {

// Bit of a placement in PlanGap::allowed.
inline constexpr uint8_t PlacementBit(GapPlacement p) {
  return static_cast<uint8_t>(1u << static_cast<int>(p));
}

// The interval between two consecutive uses of one tensor (cyclic).
struct PlanGap {
  uint32_t tensor = 0;
  uint32_t from_access = 0;  // the use it follows (position)
  uint32_t to_access = 0;    // the use it precedes (position)
  // Positions the contents wait over: from the first acquire after the
  // lease of from_access ends, to to_access: [begin, end), cyclic.
  uint32_t begin = 0;
  uint32_t end = 0;
  uint32_t length = 0;   // positions in [begin, end)
  uint32_t version = 0;  // index into PlanModel::versions
  Tier from_tier = Tier::kDevice;
  Tier to_tier = Tier::kDevice;
  bool live = false;  // to_access needs the contents (not an overwrite)
  // Not live, but the store keeps the contents until `end` (their Discard,
  // or the overwrite): they wait somewhere, and go to NVMe written but are
  // never read back.
  bool kept = false;
  bool held = false;    // from_access's lease is still held at to_access
  uint8_t allowed = 0;  // PlacementBit()s open to this gap
  GapPlacement placement = GapPlacement::kNvme;
};

// The contents of one tensor from one write to the next.
struct PlanVersion {
  uint32_t tensor = 0;
  bool dirty = false;        // written in the step: NVMe holds an older one
  bool nvme_access = false;  // an access on the NVMe tier reads it there
  uint32_t live_gaps = 0;    // live and kept gaps of the version
  uint32_t out_gaps = 0;     // of those, the gaps placed on NVMe
  // Whether NVMe must receive this version: a write-back per step.
  bool WritesBack() const { return dirty && (nvme_access || out_gaps > 0); }
};

// NVMe and device-link bytes of a set of placements.
struct PlanCost {
  uint64_t nvme_read = 0;
  uint64_t nvme_write = 0;
  uint64_t device_link = 0;  // H2D + D2H
  uint64_t nvme() const { return nvme_read + nvme_write; }
  // Fewer NVMe bytes first, then fewer device-link bytes.
  bool operator<(const PlanCost& o) const {
    return nvme() != o.nvme() ? nvme() < o.nvme() : device_link < o.device_link;
  }
};

class PlanModel {
 public:
  // Builds the gaps and versions of `input` (validated by the caller), every
  // live gap on NVMe where it may go there, else on its home tier; the
  // profiles hold the leases and the homes.
  explicit PlanModel(const PlanInput& input);

  const PlanInput& input() const { return input_; }
  size_t positions() const { return input_.accesses.size(); }
  std::vector<PlanGap>& gaps() { return gaps_; }
  const std::vector<PlanGap>& gaps() const { return gaps_; }
  const std::vector<PlanVersion>& versions() const { return versions_; }
  const PlanTensor& tensor(const PlanGap& g) const {
    return input_.tensors[g.tensor];
  }

  // The profile of an upper tier (device or host).
  CapacityProfile& profile(Tier tier) { return profiles_[Upper(tier)]; }
  const CapacityProfile& profile(Tier tier) const {
    return profiles_[Upper(tier)];
  }
  uint64_t capacity(Tier tier) const {
    return input_.capacity[static_cast<int>(tier)];
  }

  // Bytes `g` holds on `tier` over its interval when placed there (0 where
  // its home reserves the space anyway).
  uint64_t HeldBytes(const PlanGap& g, Tier tier) const;
  // Whether placing `g` on upper tier `tier` fits beside what else is
  // placed (and the leases).
  bool Fits(const PlanGap& g, Tier tier) const;
  // Moves `g` to `p`, updating the profiles and its version's counts.
  void Place(PlanGap& g, GapPlacement p);

  // The cost of the placements as they stand, and what changes if `g`
  // moves to `p` (positive: more bytes).
  PlanCost Cost() const;
  int64_t NvmeDelta(const PlanGap& g, GapPlacement p) const;
  // Device-link transfers of `g` if placed at `p`: a move after its first
  // use, a load before its next (0, 1 or 2 transfers of its bytes).
  uint64_t DeviceLinkBytes(const PlanGap& g, GapPlacement p) const;

 private:
  static int Upper(Tier tier) { return tier == Tier::kDevice ? 0 : 1; }
  void BuildGaps(uint32_t tensor, const std::vector<uint32_t>& uses);
  PlanGap MakeGap(uint32_t tensor, uint32_t a, uint32_t b) const;
  uint32_t KeptLength(const PlanGap& g) const;
  void AddLeasesAndHomes();
  void Occupy(const PlanGap& g, GapPlacement p, int64_t sign);

  const PlanInput& input_;
  std::vector<PlanGap> gaps_;
  std::vector<PlanVersion> versions_;
  std::array<CapacityProfile, 2> profiles_;
};

// Tier of an upper placement; kNvme for GapPlacement::kNvme.
Tier TierOf(GapPlacement p);
GapPlacement PlacementOf(Tier tier);

}  // namespace strata

#endif  // STRATA_SCHEDULER_PLAN_MODEL_H_
