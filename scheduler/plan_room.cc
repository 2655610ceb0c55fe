// plan_room.cc: the room a timed plan's loads hold on the device and host,
// from issue to use (HoldLoads), made to fit the budgets by issuing a load
// later where its room is not free yet (ClipLoadWindows): an access may
// then wait, but no tier passes its budget. (A copy being written back
// holds its room until the write ends; the plan does not count that: where
// it overlaps a load, the store waits for the room.)
#include <algorithm>
#include <vector>

#include "scheduler/plan_phases.h"
#include "scheduler/plan_timing.h"

namespace strata {
namespace {

int64_t TierBytes(const PlanTensor& t, Tier tier) {
  return static_cast<int64_t>(t.tier_bytes[static_cast<int>(tier)]);
}

// The position after the last one of [from, to) where `bytes` more would
// pass `cap` (`from` when none does), scanning back from `to`.
uint32_t FirstRoomyAfter(const CapacityProfile& profile, uint32_t from,
                         uint32_t to, int64_t bytes, int64_t cap) {
  const uint32_t n = static_cast<uint32_t>(profile.positions());
  if (from == to || profile.Max(from, to) + bytes <= cap) return from;
  for (uint32_t q = to; q != from;) {
    const uint32_t before = (q + n - 1) % n;
    if (profile.At(before) + bytes > cap) return q;
    q = before;
  }
  return from;
}

}  // namespace

void HoldLoads(PlanModel& model, const ResidencyPlan& plan, int sign) {
  for (const PlannedTransfer& t : plan.transfers) {
    const PlanTensor& tensor = model.input().tensors[t.tensor];
    if (t.kind != TransferKind::kLoad || t.to == tensor.home) continue;
    model.profile(t.to).Add(t.issue_at, t.access,
                            sign * TierBytes(tensor, t.to));
  }
}

void ClipLoadWindows(PlanModel& model, ResidencyPlan* plan) {
  std::vector<PlannedTransfer>& ts = plan->transfers;
  std::vector<uint32_t> loads;
  for (uint32_t i = 0; i < ts.size(); ++i) {
    if (ts[i].kind == TransferKind::kLoad) loads.push_back(i);
  }
  // Nearest uses first: a load needed sooner keeps its room.
  std::stable_sort(loads.begin(), loads.end(), [&](uint32_t a, uint32_t b) {
    return ts[a].access < ts[b].access;
  });
  for (uint32_t i : loads) {
    PlannedTransfer& t = ts[i];
    const PlanTensor& tensor = model.input().tensors[t.tensor];
    if (t.to == tensor.home) continue;
    const int64_t bytes = TierBytes(tensor, t.to);
    const auto cap = static_cast<int64_t>(model.capacity(t.to));
    t.issue_at =
        FirstRoomyAfter(model.profile(t.to), t.issue_at, t.access, bytes, cap);
    model.profile(t.to).Add(t.issue_at, t.access, bytes);
  }
  HoldLoads(model, *plan, -1);
  SortByIssue(model.positions(), ts);
  const StepSimulation sim = SimulateStep(model.input(), ts);
  plan->predicted_seconds = sim.seconds;
  plan->predicted_stalls = sim.stalls;
  plan->predicted_stall_seconds = sim.stall_seconds;
}

}  // namespace strata
