// plan_improve.cc: ImprovePlacement — local search after the greedy. For a
// gap left on NVMe it tries an upper tier, moving off that tier the gaps
// that block it at its fullest position (least NVMe bytes saved per
// byte-position first), then puts the moved gaps back wherever they fit;
// the exchange stays only when the plan carries fewer bytes (NVMe first,
// then device link). The greedy alone is G10's; the exchange step is the
// classic 1-opt repair of interval packing.
#include <algorithm>
#include <vector>

#include "scheduler/plan_phases.h"

namespace strata {
namespace {

bool Allows(const PlanGap& g, GapPlacement p) {
  return (g.allowed & PlacementBit(p)) != 0;
}

struct Delta {
  int64_t nvme = 0;
  int64_t link = 0;
  bool Better() const { return nvme < 0 || (nvme == 0 && link < 0); }
};

// Positions [begin, begin + length) (cyclic) where room was freed.
struct Freed {
  uint32_t begin = 0;
  uint32_t length = 0;
};

// One exchange in progress: every placement it changed, so that it can be
// undone.
class Exchange {
 public:
  explicit Exchange(PlanModel& model) : model_(model) {}

  void Move(uint32_t i, GapPlacement p) {
    PlanGap& g = model_.gaps()[i];
    delta_.nvme += model_.NvmeDelta(g, p);
    delta_.link += static_cast<int64_t>(model_.DeviceLinkBytes(g, p)) -
                   static_cast<int64_t>(model_.DeviceLinkBytes(g, g.placement));
    journal_.push_back({i, g.placement});
    model_.Place(g, p);
  }

  // Where the journal stands; UndoTo(Mark()) undoes what came after.
  struct Mark {
    size_t moves = 0;
    Delta delta;
  };
  Mark Now() const { return {journal_.size(), delta_}; }
  void UndoTo(const Mark& mark) {
    while (journal_.size() > mark.moves) {
      const auto [i, was] = journal_.back();
      journal_.pop_back();
      model_.Place(model_.gaps()[i], was);
    }
    delta_ = mark.delta;
  }

  const Delta& delta() const { return delta_; }

  // The intervals of the gaps this exchange moved off an upper tier.
  std::vector<Freed> FreedRoom() const {
    std::vector<struct Freed> out;
    for (const auto& [i, was] : journal_) {
      const PlanGap& g = model_.gaps()[i];
      if (was != GapPlacement::kNvme && g.placement != was && g.length > 0) {
        out.push_back({g.begin, g.length});
      }
    }
    return out;
  }

 private:
  PlanModel& model_;
  std::vector<std::pair<uint32_t, GapPlacement>> journal_;
  Delta delta_;
};

class Improver {
 public:
  // How many gaps in turn one exchange may move on to make room.
  static constexpr int kChainDepth = 2;

  Improver(PlanModel& model, std::vector<double> density, int64_t* budget)
      : model_(model),
        density_(std::move(density)),
        budget_(*budget),
        version_gaps_(model.versions().size()) {
    for (uint32_t i = 0; i < model.gaps().size(); ++i) {
      version_gaps_[model.gaps()[i].version].push_back(i);
    }
  }

  bool has_budget() const { return budget_ > 0; }

  // The upper tiers in the order a gap prefers them (plan_placement.cc).
  static std::array<GapPlacement, 2> Preferred(const PlanGap& g) {
    return g.from_tier == Tier::kDevice && g.to_tier == Tier::kDevice
               ? std::array{GapPlacement::kDevice, GapPlacement::kHost}
               : std::array{GapPlacement::kHost, GapPlacement::kDevice};
  }

  // Puts gap i on `p`, the gaps that block it going down, whatever it
  // costs (a kick); false when nothing can make room.
  bool Force(uint32_t i, GapPlacement p) {
    Exchange ex(model_);
    budget_ -= static_cast<int64_t>(model_.gaps().size());
    return Insert(ex, i, p, 0);
  }

  // Moves gap i to NVMe, whatever it costs (a kick).
  void Sink(uint32_t i) {
    budget_ -= static_cast<int64_t>(model_.gaps().size());
    model_.Place(model_.gaps()[i], GapPlacement::kNvme);
  }

  // One pass over the gaps on NVMe, best first; whether any exchange stayed.
  bool Pass(const std::vector<uint32_t>& order) {
    bool improved = false;
    for (uint32_t i : order) {
      if (budget_ <= 0) break;
      if (model_.gaps()[i].placement != GapPlacement::kNvme) continue;
      bool done = false;
      for (GapPlacement p : {GapPlacement::kDevice, GapPlacement::kHost}) {
        if (Allows(model_.gaps()[i], p) && Try(i, p, order)) {
          done = true;
          break;
        }
      }
      improved |= done || TryVersion(i, order);
    }
    return improved;
  }

 private:
  bool Try(uint32_t i, GapPlacement p, const std::vector<uint32_t>& order) {
    Exchange ex(model_);
    if (Insert(ex, i, p, kChainDepth)) {
      Refill(ex, order);
      if (ex.delta().Better()) return true;
    }
    ex.UndoTo({});
    return false;
  }

  // Every gap of i's version on NVMe goes above it in one exchange: one
  // alone saves its read, all of them also the version's write-back.
  bool TryVersion(uint32_t i, const std::vector<uint32_t>& order) {
    const std::vector<uint32_t>& mine = version_gaps_[model_.gaps()[i].version];
    if (mine.size() < 2) return false;
    Exchange ex(model_);
    for (uint32_t j : mine) {
      const PlanGap& g = model_.gaps()[j];
      if (g.placement != GapPlacement::kNvme ||
          g.allowed == PlacementBit(GapPlacement::kNvme))
        continue;
      bool placed = false;
      for (GapPlacement p : Preferred(g)) {
        if (Allows(g, p) && Insert(ex, j, p, kChainDepth)) {
          placed = true;
          break;
        }
      }
      if (!placed) break;
    }
    Refill(ex, order);
    if (ex.delta().Better()) return true;
    ex.UndoTo({});
    return false;
  }

  // Places above NVMe the gaps on NVMe that now fit (an exchange that only
  // swaps one gap for another of the same worth can free room for a third).
  // Only a gap overlapping room the exchange freed can newly fit.
  void Refill(Exchange& ex, const std::vector<uint32_t>& order) {
    budget_ -= static_cast<int64_t>(order.size()) / 8;
    const std::vector<Freed> freed = ex.FreedRoom();
    const auto n = static_cast<uint32_t>(model_.positions());
    const auto overlaps = [&](const PlanGap& g) {
      for (const Freed& f : freed) {
        if ((g.begin + n - f.begin) % n < f.length ||
            (f.begin + n - g.begin) % n < g.length) {
          return true;
        }
      }
      return false;
    };
    for (uint32_t j : order) {
      const PlanGap& g = model_.gaps()[j];
      if (g.placement != GapPlacement::kNvme || !overlaps(g)) continue;
      for (GapPlacement p : Preferred(g)) {
        if (Allows(g, p) && model_.Fits(g, TierOf(p))) {
          ex.Move(j, p);
          break;
        }
      }
    }
  }

  // Places gap i on `p`, moving off the gaps that block it at its fullest
  // position, each then put back where it fits (with `depth` left: by
  // moving others in turn, an ejection chain). False, with the moves
  // since the call undone, when nothing can make room.
  bool Insert(Exchange& ex, uint32_t i, GapPlacement p, int depth) {
    const Exchange::Mark mark = ex.Now();
    const Tier tier = TierOf(p);
    std::vector<uint32_t> evicted;
    while (!model_.Fits(model_.gaps()[i], tier)) {
      const PlanGap& g = model_.gaps()[i];
      const uint32_t at =
          static_cast<uint32_t>(model_.profile(tier).ArgMax(g.begin, g.end));
      const int64_t victim = Victim(i, tier, at);
      if (victim < 0) {
        ex.UndoTo(mark);
        return false;
      }
      const PlanGap& v = model_.gaps()[victim];
      ex.Move(static_cast<uint32_t>(victim),
              Allows(v, GapPlacement::kNvme) ? GapPlacement::kNvme : Other(p));
      evicted.push_back(static_cast<uint32_t>(victim));
    }
    ex.Move(i, p);
    for (uint32_t e : evicted) Relocate(ex, e, depth);
    return true;
  }

  // Puts a moved gap back above NVMe: where it fits, else (depth left) by
  // inserting it on a tier in turn.
  void Relocate(Exchange& ex, uint32_t e, int depth) {
    const PlanGap& g = model_.gaps()[e];
    const std::array<GapPlacement, 2> order = Preferred(g);
    for (GapPlacement p : order) {
      if (!Allows(g, p)) continue;
      if (g.placement == p) return;
      if (model_.Fits(g, TierOf(p))) {
        ex.Move(e, p);
        return;
      }
    }
    if (depth == 0 || budget_ <= 0) return;
    // A chain link stays only when it lowers the exchange's bytes.
    for (GapPlacement p : order) {
      const Exchange::Mark mark = ex.Now();
      if (!Allows(g, p) || !Insert(ex, e, p, depth - 1)) continue;
      const Delta& d = ex.delta();
      if (d.nvme < mark.delta.nvme ||
          (d.nvme == mark.delta.nvme && d.link < mark.delta.link)) {
        return;
      }
      ex.UndoTo(mark);
    }
  }

  // The gap on `tier` at `position` to move off, other than `keep`: one
  // that fits on the other upper tier as things stand (it moves at no NVMe
  // cost) before one that does not, then the one that saves least per
  // byte-position; -1 when none may move.
  int64_t Victim(uint32_t keep, Tier tier, uint32_t position) {
    const uint32_t n = static_cast<uint32_t>(model_.positions());
    const GapPlacement here = PlacementOf(tier);
    const GapPlacement other = Other(here);
    int64_t best = -1;
    double best_loss = 0;
    const std::vector<PlanGap>& gaps = model_.gaps();
    for (uint32_t j = 0; j < gaps.size(); ++j) {
      const PlanGap& h = gaps[j];
      if (j == keep || h.placement != here || h.allowed == PlacementBit(here))
        continue;
      if ((position + n - h.begin) % n >= h.length) continue;
      const uint64_t held = model_.HeldBytes(h, tier);
      if (held == 0) continue;
      // NVMe bytes lost per byte of room made: none where the other upper
      // tier takes it as things stand.
      const bool fits = Allows(h, other) && model_.Fits(h, TierOf(other));
      const double loss =
          fits || !Allows(h, GapPlacement::kNvme)
              ? 0
              : static_cast<double>(model_.NvmeDelta(h, GapPlacement::kNvme)) /
                    static_cast<double>(held);
      if (best < 0 || loss < best_loss ||
          (loss == best_loss && density_[j] < density_[best])) {
        best = j;
        best_loss = loss;
      }
    }
    budget_ -= static_cast<int64_t>(gaps.size());
    return best;
  }

  static GapPlacement Other(GapPlacement p) {
    return p == GapPlacement::kDevice ? GapPlacement::kHost
                                      : GapPlacement::kDevice;
  }

  PlanModel& model_;
  const std::vector<double> density_;
  int64_t& budget_;  // gap visits left: keeps the search linear in the step
  std::vector<std::vector<uint32_t>> version_gaps_;  // per version, its gaps
};

}  // namespace

void ImprovePlacement(PlanModel& model, const std::vector<double>& density,
                      int64_t* budget) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < model.gaps().size(); ++i) {
    const PlanGap& g = model.gaps()[i];
    if (Allows(g, GapPlacement::kNvme) &&
        g.allowed != PlacementBit(GapPlacement::kNvme))
      order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return density[a] > density[b];
  });
  Improver improver(model, density, budget);
  while (improver.Pass(order)) {
  }
  // Iterated local search: a kick forces one gap on NVMe above it (what
  // blocks it goes down), the search runs again, and the result stays
  // only when it carries fewer bytes than the best so far.
  const auto placements = [&] {
    std::vector<GapPlacement> out;
    for (const PlanGap& g : model.gaps()) out.push_back(g.placement);
    return out;
  };
  std::vector<GapPlacement> best = placements();
  PlanCost best_cost = model.Cost();
  // Keeps the kicked search when it did better, else goes back to the
  // best so far.
  const auto settle = [&] {
    while (improver.Pass(order)) {
    }
    if (const PlanCost cost = model.Cost(); cost < best_cost) {
      best_cost = cost;
      best = placements();
      return true;
    }
    for (size_t j = 0; j < best.size(); ++j) {
      model.Place(model.gaps()[j], best[j]);
    }
    return false;
  };
  for (uint32_t i : order) {
    if (!improver.has_budget()) break;
    if (model.gaps()[i].placement != GapPlacement::kNvme) continue;
    for (GapPlacement p : Improver::Preferred(model.gaps()[i])) {
      if (Allows(model.gaps()[i], p) && improver.Force(i, p) && settle()) {
        break;
      }
    }
  }
  // And the other way: a gap above NVMe forced down, least saving first.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!improver.has_budget()) break;
    if (model.gaps()[*it].placement == GapPlacement::kNvme) continue;
    improver.Sink(*it);
    settle();
  }
}

}  // namespace strata
