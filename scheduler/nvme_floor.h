// nvme_floor.h: the fewest bytes a step must read from and write to NVMe,
// whatever the schedule — the floors that reports set beside the bytes
// actually moved, and that the planner's bound is made of.
//
// The model. Above NVMe the device and host budgets are pooled (where a
// copy waits above NVMe does not change NVMe traffic). At every position of
// the cyclic step some bytes are there in any schedule (leases on the device
// or host, homes reserved there), and some are live contents waiting for
// their next read: a "gap". A schedule may keep any part of a gap on NVMe
// instead (fractionally: a lower bound), and then reads that part back
// before the next use. So reads are at least the optimum of the covering
// problem
//     minimise sum_g y_g  subject to, at every position p,
//     sum_{g live at p} y_g >= (bytes at p) - (device + host budgets),
//     0 <= y_g <= bytes of g,
// and writes the same over versions (contents from one write to the next:
// evicting any part of a dirty version writes it once; clean contents, NVMe
// holding them, evict for free).
//
// The intervals make the problem an interval-covering LP, solved exactly by
// a sweep that covers each position's shortfall with the gaps that last the
// longest — Belady's furthest-next-use rule on fractional bytes (the
// relaxation is the one Bar-Noy et al. use for caching with sizes, "A
// unified approach to approximating resource allocation and scheduling",
// JACM 2001; the rule's optimality is the usual exchange argument for
// covering by intervals). The step is a cycle: the sweep runs over k copies
// of it (k >= 8; up to 2^17 positions in all where that allows 8), cut
// where the fewest gaps cross, with the gaps that cross the ends left out;
// a cyclic schedule repeated is feasible there, so the optimum over the k
// copies, divided by k, is at most the cyclic optimum (and short of it by
// at most the bytes crossing the cut, over k). The floors are that, or the
// fullest position's shortfall, the larger. Where the leases and homes
// alone pass the budgets (the plan reports that overflow), only what waits
// counts.
//
// Thread safety: pure functions.
#ifndef STRATA_SCHEDULER_NVME_FLOOR_H_
#define STRATA_SCHEDULER_NVME_FLOOR_H_

#include <cstdint>

#include "scheduler/residency_plan.h"

namespace strata {

class PlanModel;

// Lower bounds on NVMe bytes per step, in bytes.
struct NvmeFloors {
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
};

// The floors of the cyclic step `input` (validated as PlanResidency
// validates it; an empty step has none).
NvmeFloors NvmeFloorBytes(const PlanInput& input);
// The same over a model already built from its input.
NvmeFloors NvmeFloorBytes(const PlanModel& model);

}  // namespace strata

#endif  // STRATA_SCHEDULER_NVME_FLOOR_H_
