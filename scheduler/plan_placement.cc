// plan_placement.cc: PlaceGaps and Demote — which live gaps stay above NVMe
// and on which tier.
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "scheduler/plan_phases.h"

namespace strata {
namespace {

bool Allows(const PlanGap& g, GapPlacement p) {
  return (g.allowed & PlacementBit(p)) != 0;
}

// The upper tiers in the order `g` prefers them: the device only when both
// of its uses are on the device (else it would cross the link anyway, and
// the device is the scarcer tier), then the host.
std::array<GapPlacement, 2> Preferred(const PlanGap& g) {
  if (g.from_tier == Tier::kDevice && g.to_tier == Tier::kDevice) {
    return {GapPlacement::kDevice, GapPlacement::kHost};
  }
  return {GapPlacement::kHost, GapPlacement::kDevice};
}

// NVMe bytes `g` saves by staying above NVMe (its read where it is live,
// and its version's write-back shared among the version's live and kept
// gaps), per byte-position.
double Density(const PlanModel& model, const PlanGap& g) {
  const PlanTensor& t = model.tensor(g);
  const PlanVersion& v = model.versions()[g.version];
  double saved = g.live ? static_cast<double>(t.bytes) : 0;
  if (v.dirty && !v.nvme_access && v.live_gaps > 0) {
    saved += static_cast<double>(t.bytes) / v.live_gaps;
  }
  const uint64_t held =
      std::max<uint64_t>({1, t.tier_bytes[0], t.tier_bytes[1]});
  return saved / (static_cast<double>(held) * std::max<uint32_t>(1, g.length));
}

// Gaps that may go to NVMe or stay above it.
std::vector<uint32_t> Candidates(const PlanModel& model) {
  std::vector<uint32_t> out;
  const std::vector<PlanGap>& gaps = model.gaps();
  for (uint32_t i = 0; i < gaps.size(); ++i) {
    const PlanGap& g = gaps[i];
    if (Allows(g, GapPlacement::kNvme) &&
        (Allows(g, GapPlacement::kDevice) || Allows(g, GapPlacement::kHost))) {
      out.push_back(i);
    }
  }
  return out;
}

// Places each gap of `order` above NVMe where it fits, preferred tier first.
void GreedyAbove(PlanModel& model, const std::vector<uint32_t>& order) {
  for (uint32_t i : order) {
    PlanGap& g = model.gaps()[i];
    for (GapPlacement p : Preferred(g)) {
      if (Allows(g, p) && model.Fits(g, TierOf(p))) {
        model.Place(g, p);
        break;
      }
    }
  }
}

// Gaps between two device uses that wait on the host move to the device
// where it has room: each saves a D2H and an H2D. Shortest first.
void PreferDevice(PlanModel& model) {
  std::vector<uint32_t> order;
  const std::vector<PlanGap>& gaps = model.gaps();
  for (uint32_t i = 0; i < gaps.size(); ++i) {
    const PlanGap& g = gaps[i];
    if (g.placement == GapPlacement::kHost &&
        Allows(g, GapPlacement::kDevice) && g.from_tier == Tier::kDevice &&
        g.to_tier == Tier::kDevice) {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto area = [&](const PlanGap& g) {
      return static_cast<double>(model.tensor(g).tier_bytes[0]) * g.length;
    };
    return area(gaps[a]) < area(gaps[b]);
  });
  for (uint32_t i : order) {
    PlanGap& g = model.gaps()[i];
    if (model.Fits(g, Tier::kDevice)) model.Place(g, GapPlacement::kDevice);
  }
}

// The greedy orders tried: by NVMe bytes saved per byte-position (G10's),
// by interval length alone (Belady's choice where sizes are equal), and by
// bytes saved alone.
std::vector<std::vector<uint32_t>> Orders(const PlanModel& model) {
  const std::vector<uint32_t> base = Candidates(model);
  const std::vector<PlanGap>& gaps = model.gaps();
  std::vector<std::function<double(const PlanGap&)>> keys = {
      [&](const PlanGap& g) { return Density(model, g); },
      [](const PlanGap& g) { return -static_cast<double>(g.length); },
      [&](const PlanGap& g) {
        return Density(model, g) * std::max<uint32_t>(1, g.length);
      }};
  std::vector<std::vector<uint32_t>> orders;
  for (const auto& key : keys) {
    std::vector<double> value(gaps.size(), 0);
    for (uint32_t i : base) value[i] = key(gaps[i]);
    std::vector<uint32_t> order = base;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return value[a] > value[b];
    });
    orders.push_back(std::move(order));
  }
  return orders;
}

// Random restarts after the deterministic orders, while effort is left;
// the seed is fixed: a plan depends on its input only.
constexpr size_t kRandomStarts = 64;
constexpr uint32_t kPlannerSeed = 0x5EED;

}  // namespace

void PlaceGaps(PlanModel& model) {
  const std::vector<GapPlacement> start = [&] {
    std::vector<GapPlacement> p;
    for (const PlanGap& g : model.gaps()) p.push_back(g.placement);
    return p;
  }();
  std::vector<GapPlacement> best;
  PlanCost best_cost;
  const std::vector<double> density = Densities(model);
  // The search's effort in gap visits, shared by all starts: linear in the
  // step, so a long step gets the deterministic starts and little more,
  // a short one many random restarts.
  const auto gaps = static_cast<int64_t>(model.gaps().size());
  int64_t budget = 8 * gaps + (int64_t{1} << 18);
  std::vector<std::vector<uint32_t>> orders = Orders(model);
  std::mt19937 rng(kPlannerSeed);
  for (size_t k = 0; k < orders.size() + kRandomStarts && budget > 0; ++k) {
    if (k >= orders.size()) {
      orders.push_back(orders[0]);
      std::shuffle(orders.back().begin(), orders.back().end(), rng);
    }
    for (size_t i = 0; i < start.size(); ++i) {
      model.Place(model.gaps()[i], start[i]);
    }
    GreedyAbove(model, orders[k]);
    ImprovePlacement(model, density, &budget);
    PreferDevice(model);
    budget -= gaps;
    const PlanCost cost = model.Cost();
    if (best.empty() || cost < best_cost) {
      best_cost = cost;
      best.clear();
      for (const PlanGap& g : model.gaps()) best.push_back(g.placement);
    }
  }
  // Back to NVMe first, so that no tier passes its budget on the way.
  for (PlanGap& g : model.gaps()) {
    if (Allows(g, GapPlacement::kNvme)) model.Place(g, GapPlacement::kNvme);
  }
  for (size_t i = 0; i < best.size(); ++i) {
    model.Place(model.gaps()[i], best[i]);
  }
}

std::vector<double> Densities(const PlanModel& model) {
  std::vector<double> out;
  out.reserve(model.gaps().size());
  for (const PlanGap& g : model.gaps()) out.push_back(Density(model, g));
  return out;
}

}  // namespace strata
