// plan_transfers.cc: the transfers a set of placements implies, gap by gap,
// and the link bytes they carry (BuildTransfers, in plan_timing.h).
#include <vector>

#include "scheduler/plan_timing.h"

namespace strata {
namespace {

bool IsUpper(Tier tier) { return tier != Tier::kNvme; }

class TransferBuilder {
 public:
  TransferBuilder(const PlanModel& model, std::vector<PlannedTransfer>* out)
      : model_(model), out_(out) {}

  // One tensor's gaps, [first, last) of the model's, in use order from its
  // first write: a version's write-back goes with its first gap on NVMe.
  void Tensor(size_t first, size_t last) {
    uint32_t written_version = UINT32_MAX;
    for (size_t i = first; i < last; ++i) {
      const PlanGap& g = model_.gaps()[i];
      const PlanGap& next = model_.gaps()[i + 1 < last ? i + 1 : first];
      const PlanGap& prev = model_.gaps()[i > first ? i - 1 : last - 1];
      Gap(g, prev, next, &written_version);
    }
  }

 private:
  void Gap(const PlanGap& g, const PlanGap& prev, const PlanGap& next,
           uint32_t* written_version) {
    const PlanTensor& t = model_.tensor(g);
    if (g.held) return;
    if ((!g.live && !g.kept) || g.placement == GapPlacement::kNvme) {
      LeaveFrom(g, prev, written_version);
      if (g.live && IsUpper(g.to_tier)) {
        Add(g, TransferKind::kLoad, Tier::kNvme, g.to_tier, g.to_access);
      }
      return;
    }
    const Tier tier = TierOf(g.placement);
    if (!g.live) {  // kept above NVMe until the contents die
      if (IsUpper(g.from_tier) && g.from_tier != tier) {
        Add(g, TransferKind::kMove, g.from_tier, tier, g.from_access);
      }
      if (t.home != tier) AddDrop(g, tier, g.end);
      return;
    }
    if (IsUpper(g.from_tier) && g.from_tier != tier) {
      // A read left the copy on `tier` valid: the one on the tier of the
      // use is freed (unless that tier is its home).
      if (!KeptFromPrev(g, prev)) {
        Add(g, TransferKind::kMove, g.from_tier, tier, g.from_access);
      } else if (t.home != g.from_tier) {
        AddDrop(g, g.from_tier, g.begin);
      }
    }
    if (IsUpper(g.to_tier) && g.to_tier != tier) {
      Add(g, TransferKind::kLoad, tier, g.to_tier, g.to_access);
      // The copy on `tier` stays valid through a read; it is freed unless
      // the next gap waits on the same tier (KeptFromPrev).
      if (!KeptFromPrev(next, g) && t.home != tier) {
        AddDrop(g, tier, g.end);
      }
    }
  }

  // Whether `g` finds its copy already on its tier: the gap before waited
  // there and the use between them only read it (a weight read on the
  // device keeps its host copy).
  bool KeptFromPrev(const PlanGap& g, const PlanGap& prev) const {
    return !g.held && g.live && prev.live && !prev.held &&
           g.placement != GapPlacement::kNvme &&
           prev.placement == g.placement &&
           g.from_tier != TierOf(g.placement) &&
           model_.input().accesses[g.from_access].access == Access::kRead;
  }

  // What leaves the tier of g's first use when g waits on NVMe or its
  // contents die: the version's write-back (once), else a drop.
  void LeaveFrom(const PlanGap& g, const PlanGap& prev,
                 uint32_t* written_version) {
    const PlanTensor& t = model_.tensor(g);
    if (!IsUpper(g.from_tier) || t.home == g.from_tier) return;
    if (KeptFromPrev(g, prev)) return;
    const PlanVersion& v = model_.versions()[g.version];
    if ((g.live || g.kept) && v.WritesBack() && *written_version != g.version) {
      *written_version = g.version;
      Add(g, TransferKind::kWriteBack, g.from_tier, Tier::kNvme, g.from_access);
      return;
    }
    AddDrop(g, g.from_tier, g.begin);
  }

  void Add(const PlanGap& g, TransferKind kind, Tier from, Tier to,
           uint32_t access) {
    out_->push_back(
        {.tensor = g.tensor,
         .kind = kind,
         .from = from,
         .to = to,
         .bytes = model_.tensor(g).bytes,
         .access = access,
         .issue_at = kind == TransferKind::kLoad ? g.to_access : g.begin});
  }

  void AddDrop(const PlanGap& g, Tier tier, uint32_t at) {
    out_->push_back({.tensor = g.tensor,
                     .kind = TransferKind::kDrop,
                     .from = tier,
                     .access = g.from_access,
                     .issue_at = at});
  }

  const PlanModel& model_;
  std::vector<PlannedTransfer>* out_;
};

}  // namespace

std::vector<PlannedTransfer> BuildTransfers(const PlanModel& model) {
  std::vector<PlannedTransfer> out;
  TransferBuilder builder(model, &out);
  const std::vector<PlanGap>& gaps = model.gaps();
  for (size_t first = 0; first < gaps.size();) {
    size_t last = first + 1;
    while (last < gaps.size() && gaps[last].tensor == gaps[first].tensor) {
      ++last;
    }
    builder.Tensor(first, last);
    first = last;
  }
  return out;
}

LinkSet LinksOf(const PlannedTransfer& t) {
  LinkSet links;
  if (t.kind == TransferKind::kDrop) return links;
  const auto add = [&](Link l) { links.link[links.count++] = l; };
  if (t.from == Tier::kNvme) add(Link::kNvmeRead);
  if (t.to == Tier::kNvme) add(Link::kNvmeWrite);
  if (t.from == Tier::kDevice) add(Link::kD2H);
  if (t.to == Tier::kDevice) add(Link::kH2D);
  return links;
}

}  // namespace strata
