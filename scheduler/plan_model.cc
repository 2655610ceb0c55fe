// plan_model.cc: PlanModel — gaps and versions from the accesses, the
// capacity profiles, and the cost of the placements.
#include "scheduler/plan_model.h"

#include <algorithm>

namespace strata {
namespace {

bool IsWrite(Access access) { return access != Access::kRead; }

bool IsUpper(Tier tier) { return tier != Tier::kNvme; }

// Adds `bytes` over the `length` positions from `from` (all of them when
// length reaches the step).
void AddSpan(CapacityProfile& profile, size_t from, size_t length,
             int64_t bytes) {
  const size_t n = profile.positions();
  if (length >= n) {
    profile.AddAll(bytes);
  } else {
    profile.Add(from, (from + length) % n, bytes);
  }
}

}  // namespace

Tier TierOf(GapPlacement p) {
  switch (p) {
    case GapPlacement::kDevice:
      return Tier::kDevice;
    case GapPlacement::kHost:
      return Tier::kHost;
    case GapPlacement::kNvme:
      break;
  }
  return Tier::kNvme;
}

GapPlacement PlacementOf(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return GapPlacement::kDevice;
    case Tier::kHost:
      return GapPlacement::kHost;
    case Tier::kNvme:
      break;
  }
  return GapPlacement::kNvme;
}

PlanModel::PlanModel(const PlanInput& input)
    : input_(input),
      profiles_{CapacityProfile(input.accesses.size()),
                CapacityProfile(input.accesses.size())} {
  std::vector<std::vector<uint32_t>> uses(input.tensors.size());
  for (uint32_t p = 0; p < input.accesses.size(); ++p) {
    uses[input.accesses[p].tensor].push_back(p);
  }
  for (uint32_t t = 0; t < uses.size(); ++t) {
    if (!uses[t].empty()) BuildGaps(t, uses[t]);
  }
  AddLeasesAndHomes();
  for (PlanGap& g : gaps_) {
    if (g.allowed == 0) continue;
    if (g.placement == GapPlacement::kNvme && (g.live || g.kept)) {
      ++versions_[g.version].out_gaps;
    }
  }
  for (const PlanGap& g : gaps_) {
    if (g.allowed != 0) Occupy(g, g.placement, +1);
  }
}

// One gap per use, in use order; versions start at each write, from the
// first write on (all one clean version when the step never writes).
void PlanModel::BuildGaps(uint32_t tensor, const std::vector<uint32_t>& uses) {
  const size_t k = uses.size();
  size_t first_write = 0;
  while (first_write < k && !IsWrite(input_.accesses[uses[first_write]].access))
    ++first_write;
  if (first_write == k) {
    first_write = 0;
    versions_.push_back({.tensor = tensor});
  }
  for (size_t j = 0; j < k; ++j) {
    const size_t i = (first_write + j) % k;
    const PlanAccess& use = input_.accesses[uses[i]];
    if (IsWrite(use.access)) {
      // Written on NVMe itself: NVMe holds the version already.
      versions_.push_back({.tensor = tensor, .dirty = use.tier != Tier::kNvme});
    } else if (use.tier == Tier::kNvme) {
      versions_.back().nvme_access = true;
    }
    PlanGap g = MakeGap(tensor, uses[i], uses[(i + 1) % k]);
    g.version = static_cast<uint32_t>(versions_.size() - 1);
    if ((g.live || g.kept) && !g.held) ++versions_.back().live_gaps;
    gaps_.push_back(g);
  }
}

PlanGap PlanModel::MakeGap(uint32_t tensor, uint32_t a, uint32_t b) const {
  const uint32_t n = static_cast<uint32_t>(positions());
  const PlanAccess& from = input_.accesses[a];
  const PlanAccess& to = input_.accesses[b];
  const uint32_t distance = b > a ? b - a : b + n - a;  // n for one use
  const uint32_t hold = from.hold_end - a;
  PlanGap g{.tensor = tensor,
            .from_access = a,
            .to_access = b,
            .begin = from.hold_end % n,
            .end = b,
            .length = hold >= distance ? 0 : distance - hold,
            .from_tier = from.tier,
            .to_tier = to.tier,
            .live = to.access != Access::kOverwrite,
            .held = hold > distance};
  const Tier home = input_.tensors[tensor].home;
  if (g.held) {
    g.placement = PlacementOf(from.tier);
    return g;
  }
  if (!g.live) {
    const uint32_t kept = KeptLength(g);
    if (kept == 0) return g;  // dead: dropped, kNvme, no choice
    g.kept = true;
    g.end = (g.begin + kept) % n;
    g.length = kept;
  }
  if (home == Tier::kDevice) {
    g.allowed = PlacementBit(GapPlacement::kDevice);
    g.placement = GapPlacement::kDevice;
  } else if (home == Tier::kHost) {
    g.allowed = PlacementBit(GapPlacement::kHost);
    if (!g.kept) g.allowed |= PlacementBit(GapPlacement::kDevice);
    g.placement = GapPlacement::kHost;
  } else if (!IsUpper(from.tier) || (g.live && !IsUpper(to.tier))) {
    g.allowed = PlacementBit(GapPlacement::kNvme);
  } else {
    g.allowed = PlacementBit(GapPlacement::kDevice) |
                PlacementBit(GapPlacement::kHost) |
                PlacementBit(GapPlacement::kNvme);
  }
  return g;
}

// Positions from g.begin over which the store keeps the contents of a gap
// its next use overwrites (PlanAccess::dies_at); 0: dead from the start. A
// death outside the gap (a discard seen in another replay) keeps them to the
// overwrite.
uint32_t PlanModel::KeptLength(const PlanGap& g) const {
  const uint32_t dies_at = input_.accesses[g.from_access].dies_at;
  if (dies_at == PlanAccess::kDiesAtRelease || g.length == 0) return 0;
  if (dies_at == PlanAccess::kKeptToOverwrite) return g.length;
  const auto n = static_cast<uint32_t>(positions());
  const uint32_t d = (dies_at + n - g.begin) % n;
  return d <= g.length ? d : g.length;
}

// Leases occupy their tier from the acquire to the first acquire after the
// release; a home on the device or host is reserved at every position.
void PlanModel::AddLeasesAndHomes() {
  for (const PlanTensor& t : input_.tensors) {
    if (IsUpper(t.home)) {
      profile(t.home).AddAll(
          static_cast<int64_t>(t.tier_bytes[static_cast<int>(t.home)]));
    }
  }
  for (uint32_t p = 0; p < positions(); ++p) {
    const PlanAccess& a = input_.accesses[p];
    const PlanTensor& t = input_.tensors[a.tensor];
    if (!IsUpper(a.tier) || t.home == a.tier) continue;
    AddSpan(profile(a.tier), p, a.hold_end - p,
            static_cast<int64_t>(t.tier_bytes[static_cast<int>(a.tier)]));
  }
}

uint64_t PlanModel::HeldBytes(const PlanGap& g, Tier tier) const {
  const PlanTensor& t = tensor(g);
  return t.home == tier ? 0 : t.tier_bytes[static_cast<int>(tier)];
}

bool PlanModel::Fits(const PlanGap& g, Tier tier) const {
  const uint64_t bytes = HeldBytes(g, tier);
  if (bytes == 0 || g.length == 0) return true;
  // Where g already waits on this tier, its own bytes are in the profile.
  const int64_t own =
      g.placement == PlacementOf(tier) ? static_cast<int64_t>(bytes) : 0;
  const int64_t peak = profile(tier).Max(g.begin, g.end) - own;
  return peak + static_cast<int64_t>(bytes) <=
         static_cast<int64_t>(capacity(tier));
}

void PlanModel::Occupy(const PlanGap& g, GapPlacement p, int64_t sign) {
  if (p == GapPlacement::kNvme || g.length == 0) return;
  const Tier tier = TierOf(p);
  const uint64_t bytes = HeldBytes(g, tier);
  if (bytes > 0) {
    AddSpan(profile(tier), g.begin, g.length,
            sign * static_cast<int64_t>(bytes));
  }
}

void PlanModel::Place(PlanGap& g, GapPlacement p) {
  if (p == g.placement) return;
  PlanVersion& v = versions_[g.version];
  Occupy(g, g.placement, -1);
  const bool counts = g.live || g.kept;
  if (g.placement == GapPlacement::kNvme && counts) --v.out_gaps;
  g.placement = p;
  Occupy(g, p, +1);
  if (p == GapPlacement::kNvme && counts) ++v.out_gaps;
}

uint64_t PlanModel::DeviceLinkBytes(const PlanGap& g, GapPlacement p) const {
  const uint64_t bytes = tensor(g).bytes;
  const Tier tier = TierOf(p);
  uint64_t moved = 0;
  if (p == GapPlacement::kNvme) {
    // A dirty device copy goes down over D2H; a load to the device comes
    // up over H2D.
    if (g.from_tier == Tier::kDevice && versions_[g.version].dirty) {
      moved += bytes;
    }
    if (g.live && g.to_tier == Tier::kDevice) moved += bytes;
    return moved;
  }
  if (IsUpper(g.from_tier) && g.from_tier != tier) moved += bytes;
  if (g.live && IsUpper(g.to_tier) && g.to_tier != tier) moved += bytes;
  return moved;
}

PlanCost PlanModel::Cost() const {
  PlanCost cost;
  for (const PlanGap& g : gaps_) {
    if ((!g.live && !g.kept) || g.held) continue;
    if (g.live && g.placement == GapPlacement::kNvme) {
      cost.nvme_read += tensor(g).bytes;
    }
    cost.device_link += DeviceLinkBytes(g, g.placement);
  }
  for (const PlanVersion& v : versions_) {
    if (v.WritesBack()) cost.nvme_write += input_.tensors[v.tensor].bytes;
  }
  return cost;
}

int64_t PlanModel::NvmeDelta(const PlanGap& g, GapPlacement p) const {
  const bool out_now = g.placement == GapPlacement::kNvme;
  const bool out_then = p == GapPlacement::kNvme;
  if ((!g.live && !g.kept) || g.held || out_now == out_then) return 0;
  const PlanVersion& v = versions_[g.version];
  const auto bytes = static_cast<int64_t>(tensor(g).bytes);
  // The version's write-back comes with its first gap on NVMe and goes
  // with its last; only a live gap is read back.
  const bool write_changes =
      v.dirty && !v.nvme_access && v.out_gaps == (out_then ? 0u : 1u);
  const int64_t delta = (g.live ? bytes : 0) + (write_changes ? bytes : 0);
  return out_then ? delta : -delta;
}

}  // namespace strata
