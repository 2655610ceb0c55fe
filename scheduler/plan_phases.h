// plan_phases.h: the residency planner's phases over a PlanModel, in the
// order PlanResidency runs them. Internal to scheduler/.
//
// Thread safety: none; each runs within one planning call.
#ifndef STRATA_SCHEDULER_PLAN_PHASES_H_
#define STRATA_SCHEDULER_PLAN_PHASES_H_

#include <vector>

#include "scheduler/plan_model.h"
#include "scheduler/residency_plan.h"

namespace strata {

// Places the gaps that may stay above NVMe: greedily by the NVMe bytes each
// saves per byte-position it holds (G10's order by memory-time area), on the
// tier its uses prefer where it fits, then moves gaps between two device
// uses from the host to the device where room is left (device-link bytes).
// Of several greedy orders it keeps the placements that cost least.
void PlaceGaps(PlanModel& model);

// Per gap, the NVMe bytes it saves above NVMe per byte-position it holds
// there (the greedy's order).
std::vector<double> Densities(const PlanModel& model);

// Local search after the greedy (plan_improve.cc): for each gap left on
// NVMe, tries an upper tier by moving the gaps that block it elsewhere;
// keeps each exchange that lowers the plan's bytes; then kicks (one gap
// forced up or down) and searches again, keeping what does better. Spends
// at most about `*budget` gap visits, less what it spends.
void ImprovePlacement(PlanModel& model, const std::vector<double>& density,
                      int64_t* budget);

// The transfers the placements imply (loads, moves, write-backs, drops),
// each with its links' bytes counted in `plan->link_bytes`, sorted by
// issue_at, timed: each load issued at the latest position that lets it
// finish before its use with the loads after it on its link, moved earlier
// by the wait a simulation of the step shows (Capuchin's feedback). Sets
// the plan's transfers, link bytes, predicted time and stalls.
void TimeTransfers(const PlanModel& model, ResidencyPlan* plan);

// Adds to the model's profiles (sign -1: removes) the room each timed load
// holds, from its issue to its use.
void HoldLoads(PlanModel& model, const ResidencyPlan& plan, int sign);

// Issues later the loads whose room would pass a budget (nearest uses keep
// theirs), re-sorts the transfers and simulates the step again: the plan's
// predicted time and stalls then include what the budgets cost.
void ClipLoadWindows(PlanModel& model, ResidencyPlan* plan);

}  // namespace strata

#endif  // STRATA_SCHEDULER_PLAN_PHASES_H_
