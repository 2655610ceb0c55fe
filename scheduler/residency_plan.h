// residency_plan.h: the residency planner's input (one learned, cyclic step)
// and its output (where every tensor lives over the step, every transfer
// with its latest start, the bytes per link, a lower bound and the
// predicted step time), and PlanResidency, the pure function between them.
//
// The model. A step is a cycle of n accesses (positions 0..n-1; after n-1
// comes 0 of the next step). Between two consecutive uses of a tensor (a
// "gap", cyclic) its contents are either dead (the next use overwrites
// them: nothing is kept, the copy is dropped) or live, and a live gap is
// placed on one tier: it stays on the device, stays on the host, or goes
// out to NVMe (written back once per version if dirty, read back before
// the next use). A lease occupies its tier from its acquire to the first
// acquire after its release. At every position the copies placed on a tier
// plus its leases must fit its budget. The planner chooses the placements
// that carry the fewest NVMe bytes, then the fewest device-link bytes, and
// times the transfers so that no access waits where the links allow it.
//
// Where the ideas come from: the gap ("inactive interval") formulation and
// the greedy by memory-time area are G10's tensor vitality analysis (Zhang
// et al., MICRO 2023); moving a load earlier by the stall a simulation of
// the plan shows is Capuchin's feedback on its in-trigger (Peng et al.,
// ASPLOS 2020); a plan made from a profiled first step is TeraIO's.
//
// Thread safety: plain values and a pure function.
#ifndef STRATA_SCHEDULER_RESIDENCY_PLAN_H_
#define STRATA_SCHEDULER_RESIDENCY_PLAN_H_

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/stats.h"
#include "strata/tensor.h"

namespace strata {

// One tensor of the step.
struct PlanTensor {
  uint64_t bytes = 0;  // logical size: what a transfer moves
  // The extent a copy takes on each tier (the size rounded to its granule);
  // the NVMe entry is unused.
  std::array<uint64_t, kNumTiers> tier_bytes{};
  // kNvme: space reserved on NVMe, the host and device copies are caches.
  // kHost: its host copy is reserved for life and never goes to NVMe.
  // kDevice: pinned on the device for life.
  Tier home = Tier::kNvme;
};

// One acquire of the step.
struct PlanAccess {
  uint32_t tensor = 0;  // index into PlanInput::tensors
  Tier tier = Tier::kDevice;
  Access access = Access::kRead;
  // Position of the first acquire after this lease's release (position + 1:
  // released before the next acquire; n: held to the step's end).
  uint32_t hold_end = 0;
  // Compute seconds from the step's first acquire to this one (stalls not
  // counted), non-decreasing; all 0 when no times are known.
  double at_seconds = 0;
  // When the next use overwrites the contents this access leaves, where
  // they die: kDiesAtRelease (dead once this lease ends), a position p (the
  // store keeps them until the first acquire after their Discard, which is
  // p, cyclically: in the next step when p comes before this access), or
  // kKeptToOverwrite (never discarded: kept until the overwrite). Kept
  // contents need room above NVMe or a write-back, never a read. Ignored
  // where the next use reads them.
  static constexpr uint32_t kDiesAtRelease = UINT32_MAX - 1;
  static constexpr uint32_t kKeptToOverwrite = UINT32_MAX;
  uint32_t dies_at = kDiesAtRelease;
};

struct PlanInput {
  std::vector<PlanTensor> tensors;
  std::vector<PlanAccess> accesses;  // the cyclic step, in order
  // Compute seconds from the step's first acquire to the next step's; 0
  // when no times are known.
  double step_seconds = 0;
  // Budget of the device and host tiers in bytes (the NVMe entry is unused).
  std::array<uint64_t, kNumTiers> capacity{};
  // Each link's bandwidth in bytes per second (strata/stats.h's Link
  // order); 0: unknown, which plans every transfer as if instantaneous.
  std::array<double, kNumLinks> link_bytes_per_second{};
};

// Where a live gap's contents stay.
enum class GapPlacement : uint8_t { kDevice, kHost, kNvme };

enum class TransferKind : uint8_t {
  kLoad,       // to the tier of an access that needs the contents
  kMove,       // to the other upper tier, right after a use
  kWriteBack,  // to NVMe, right after a use (the version's only write)
  kDrop,       // free the copy: clean (NVMe holds it) or dead contents
};
std::string_view TransferKindName(TransferKind kind);

struct PlannedTransfer {
  uint32_t tensor = 0;
  TransferKind kind = TransferKind::kLoad;
  Tier from = Tier::kNvme;  // the copy read (the copy freed, for kDrop)
  Tier to = Tier::kDevice;  // the copy made (unused for kDrop)
  uint64_t bytes = 0;       // moved over the link(s); 0 for kDrop
  // The access this serves: a load's next use, the use a move, write-back
  // or drop follows.
  uint32_t access = 0;
  // Issue it when the step reaches this position (before its acquire). For
  // a load: the last position that still lets it finish in time.
  uint32_t issue_at = 0;
  // The latest start, compute seconds from the step's start (negative: in
  // the previous step), for a load; the earliest start after the use for
  // the others.
  double start_seconds = 0;
};

// A copy on a tier over positions [from, to) of the cycle (to <= from
// wraps past the step's end; from == to with `whole_step`: all of it).
struct PlannedResidency {
  uint32_t tensor = 0;
  Tier tier = Tier::kDevice;
  uint32_t from = 0;
  uint32_t to = 0;
  bool whole_step = false;
};

struct ResidencyPlan {
  // In the order to issue them: by issue_at; at one position, what follows
  // a use (moves, write-backs, drops) before loads, nearest use first.
  std::vector<PlannedTransfer> transfers;
  std::vector<PlannedResidency> residencies;
  // Tensors that stay on one tier for the whole step (never moved).
  std::vector<uint32_t> stays_device;
  std::vector<uint32_t> stays_host;
  // Planned bytes over each link per step (strata/stats.h's Link order).
  std::array<uint64_t, kNumLinks> link_bytes{};
  // Lower bounds on NVMe bytes per step whatever the plan
  // (scheduler/nvme_floor.h).
  uint64_t nvme_read_floor_bytes = 0;
  uint64_t nvme_write_floor_bytes = 0;
  // Lower bound on the step: the compute, each link's floor bytes over its
  // bandwidth, whichever is longest.
  double bound_seconds = 0;
  // The step's time when the plan runs as planned (a simulation of compute
  // and the links), steady state.
  double predicted_seconds = 0;
  // Highest bytes the plan holds on each tier at any position.
  std::array<uint64_t, kNumTiers> peak_bytes{};
  // Accesses the simulation predicts to wait, and for how long in all.
  uint64_t predicted_stalls = 0;
  double predicted_stall_seconds = 0;
  // The most the leases alone ask of each tier beyond its budget; 0 where
  // they fit.
  std::array<uint64_t, kNumTiers> overflow_bytes{};

  uint64_t nvme_bytes() const {
    return link_bytes[static_cast<int>(Link::kNvmeRead)] +
           link_bytes[static_cast<int>(Link::kNvmeWrite)];
  }
};

// Plans the cyclic step `input` describes. InvalidArgument when an access
// names a tensor out of range, a hold_end is not in (position, n], times
// decrease or a bandwidth is negative. Where the leases alone overflow a
// tier the plan is still made (nothing more stays on that tier) and
// `overflow_bytes` says by how much: the store will then evict on demand.
absl::StatusOr<ResidencyPlan> PlanResidency(const PlanInput& input);

}  // namespace strata

#endif  // STRATA_SCHEDULER_RESIDENCY_PLAN_H_
