// plan_timing.h: the residency planner's transfers and their timing —
// which transfers a set of placements implies, which links each crosses,
// and a simulation of the step (compute, one queue per link) that says
// when each finishes and how long the accesses wait. Internal to
// scheduler/.
//
// Thread safety: pure functions.
#ifndef STRATA_SCHEDULER_PLAN_TIMING_H_
#define STRATA_SCHEDULER_PLAN_TIMING_H_

#include <vector>

#include "scheduler/plan_model.h"
#include "scheduler/residency_plan.h"

namespace strata {

// The loads, moves, write-backs and drops of the model's placements, gap by
// gap (unsorted, untimed: a load is issued at its use, the rest at the
// gap's begin).
std::vector<PlannedTransfer> BuildTransfers(const PlanModel& model);

// The links `t` crosses: NVMe read or write, and H2D or D2H where it starts
// or ends on the device (an NVMe load to the device crosses both).
struct LinkSet {
  Link link[2] = {};
  int count = 0;
  const Link* begin() const { return link; }
  const Link* end() const { return link + count; }
};
LinkSet LinksOf(const PlannedTransfer& t);

// Sorts `ts` (of a step of `n` positions) in the order the executor
// issues them: by issue_at; at one position what follows a use first (it
// frees room, and goes ahead of reads on NVMe), then loads, nearest use
// first.
void SortByIssue(size_t n, std::vector<PlannedTransfer>& ts);

// Seconds `t` takes: its bytes over the slowest link it crosses (0 where
// the bandwidths are unknown).
double TransferSeconds(const PlanInput& input, const PlannedTransfer& t);

// The first position after `from` (cyclic, at most n - 1 on) whose time is
// `seconds` or more after from's.
uint32_t PositionAfter(const PlanInput& input, uint32_t from, double seconds);

// What a simulation of two steps found in the second (the first fills the
// queues and issues the loads the second starts with).
struct StepSimulation {
  double seconds = 0;        // the step's length, stalls included
  uint64_t stalls = 0;       // accesses that waited for a load
  double stall_seconds = 0;  // their waits, summed
  // Per transfer (the input's order): how long its access waited for it
  // (loads; 0 for the rest).
  std::vector<double> wait_seconds;
};

// Simulates `transfers` (timed: issue_at set) over the step of `input`:
// compute takes the accesses' times, a transfer issued at a position
// queues on its link (H2D, D2H, and one NVMe queue for reads and writes)
// and takes its bytes over the bandwidth, an access waits for its load.
StepSimulation SimulateStep(const PlanInput& input,
                            const std::vector<PlannedTransfer>& transfers);

}  // namespace strata

#endif  // STRATA_SCHEDULER_PLAN_TIMING_H_
