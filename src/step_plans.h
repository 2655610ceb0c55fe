// step_plans.h: StepPlans, the residency plans (scheduler/residency_plan.h)
// of the step shapes a store has learned, and which of a plan's transfers
// fall due as a step goes: the executor's bookkeeping, apart from the
// store's locking and transfers so that it is tested alone.
//
// Policy: a shape is planned after the step that recorded it and again
// after each of its next kReplans steps (the links' bandwidths and the
// step's times are measured better with each), then after its steps 8, 16,
// 32, ... (times drift as a run warms up; the plans' cost stays a vanishing
// share of the steps between them), and whenever its trace is re-recorded
// or learns an access kind. A plan whose trace the predictor dropped is dropped
// too.
//
// Thread safety: none; the store calls it with its mutex held.
#ifndef STRATA_SRC_STEP_PLANS_H_
#define STRATA_SRC_STEP_PLANS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "scheduler/predictor.h"
#include "scheduler/residency_plan.h"
#include "strata/tensor.h"

namespace strata {

class StepPlans {
 public:
  // Plans made after each of a shape's first steps, then only on change.
  static constexpr uint64_t kReplans = 3;

  struct Entry {
    uint64_t generation = 0;  // of the trace planned
    uint64_t steps = 0;       // the shape's steps when planned
    ResidencyPlan plan;
    std::vector<TensorId> ids;  // PlanAccess::tensor -> the store's id
    // first_at[p]: index in plan.transfers of the first one issued at
    // position p or later; positions + 1 entries.
    std::vector<uint32_t> first_at;
    absl::flat_hash_map<TensorId, uint32_t> index;  // ids inverted
    // Per plan tensor and upper tier (device, host): the cyclic position
    // intervals [from, to) over which the plan keeps a copy there, a
    // load's room from its issue to its use included.
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> kept[2];
  };

  // Whether `shape` should be planned now (see the policy above).
  bool NeedsPlan(const StepShape& shape) const;
  void Set(const StepShape& shape, ResidencyPlan plan,
           std::vector<TensorId> ids);
  const Entry* Find(uint64_t serial) const;
  // Whether `entry` keeps tensor `id`'s copy on `tier` (device or host) at
  // `position`; true for a tensor the plan does not know.
  static bool Keeps(const Entry& entry, TensorId id, Tier tier,
                    uint32_t position);
  // Keeps only the plans of the traces `kept` names.
  void Retain(absl::Span<const uint64_t> kept);
  size_t size() const { return plans_.size(); }

  // The transfers of trace `serial`'s plan due when step `step` (any serial
  // that changes with each step) reaches `position`: those issued at
  // positions after the last one this returned for the same step and
  // trace, through `position`. Empty without a plan.
  absl::Span<const PlannedTransfer> Due(uint64_t serial, uint64_t step,
                                        uint32_t position);

 private:
  absl::flat_hash_map<uint64_t, Entry> plans_;
  uint64_t due_serial_ = 0;
  uint64_t due_step_ = 0;
  uint32_t due_next_ = 0;  // the next position whose transfers are due
};

}  // namespace strata

#endif  // STRATA_SRC_STEP_PLANS_H_
