// planning.cc: how StoreCore plans a learned step and follows the plan —
// the executor of scheduler/residency_plan.h.
//
// At each step's end the shape the step ran on is planned (StepPlans'
// policy) from its trace, the tensors' sizes and homes, the budgets, and
// the bandwidths the mover measured so far. While a planned shape is
// replayed, each acquire issues the plan's transfers due up to its
// position: loads become prefetch jobs (several in flight, in plan order),
// a copy the plan moves off a tier after its use is written back at once
// (room made ahead, while the link is free) or dropped when clean. An
// access the plan did not foresee (a miss) is served on demand and
// Belady eviction makes room where the plan did not; a changed trace is
// planned again at the next step's end.
#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "scheduler/plan_timing.h"
#include "src/store_core.h"

namespace strata {

void StoreCore::PlanStep() {
  if (!options_.scheduler.prefetch || !options_.scheduler.planned ||
      unified()) {
    return;
  }
  plans_.Retain(predictor_.trace_serials());
  const std::optional<StepShape> shape =
      predictor_.Shape(predictor_.previous_trace());
  if (!shape.has_value() || !plans_.NeedsPlan(*shape)) return;
  PlanInput input;
  std::vector<TensorId> ids;
  if (!BuildPlanInput(*shape, &input, &ids)) return;
  const absl::Time start = absl::Now();
  absl::StatusOr<ResidencyPlan> plan = PlanResidency(input);
  planning_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  if (!plan.ok()) return;  // a store bug: the reactive path goes on
  ++plans_made_;
  plans_.Set(*shape, *std::move(plan), std::move(ids));
}

namespace {

// PlanAccess::dies_at of an access whose contents the predictor saw
// discarded at `discard` (Predictor's StepShape::discards), in a step of n.
uint32_t DiesAt(uint32_t discard, uint32_t n) {
  return discard == Predictor::kNotDiscarded ? PlanAccess::kKeptToOverwrite
                                             : discard % n;
}

}  // namespace

bool StoreCore::BuildPlanInput(const StepShape& shape, PlanInput* input,
                               std::vector<TensorId>* ids) const {
  const Trace& trace = *shape.trace;
  const auto n = static_cast<uint32_t>(trace.size());
  if (n == 0 || shape.offsets.size() != n || shape.hold_ends.size() != n ||
      shape.discards.size() != n) {
    return false;
  }
  absl::flat_hash_map<TensorId, uint32_t> index;
  double at = 0;
  for (uint32_t p = 0; p < n; ++p) {
    const AccessEvent& event = trace[p];
    auto it = tensors_.find(event.id);
    if (it == tensors_.end()) return false;  // destroyed: wait for a re-record
    const auto [slot, added] =
        index.try_emplace(event.id, static_cast<uint32_t>(ids->size()));
    if (added) {
      const TensorSpec& spec = it->second->spec;
      ids->push_back(event.id);
      input->tensors.push_back(
          {.bytes = spec.size_bytes,
           .tier_bytes = {alloc_[0]->RoundUp(spec.size_bytes),
                          alloc_[1]->RoundUp(spec.size_bytes),
                          alloc_[2]->RoundUp(spec.size_bytes)},
           .home = spec.home});
    }
    at = std::max(at, shape.offsets[p]);  // skipped positions keep old times
    input->accesses.push_back(
        {.tensor = slot->second,
         .tier = event.tier,
         .access = event.access,
         .hold_end = std::clamp(shape.hold_ends[p], p + 1, n),
         .at_seconds = at,
         .dies_at = DiesAt(shape.discards[p], n)});
  }
  input->step_seconds = std::max(shape.length_seconds, at);
  input->capacity = {capacity_[0], capacity_[1], 0};
  const std::array<double, kNumLinks> gbps = mover_->Gbps();
  for (int l = 0; l < kNumLinks; ++l) {
    input->link_bytes_per_second[l] = gbps[l] * 1e9;
  }
  return true;
}

bool StoreCore::ExecutePlan(TensorId id, const PredictedUse& use) {
  if (!options_.scheduler.planned) return false;
  const uint64_t serial = predictor_.current_trace();
  const StepPlans::Entry* entry = plans_.Find(serial);
  if (entry == nullptr) return false;
  RetryLeaves(id);
  if (use.trace != serial) return true;  // a miss: on demand
  plan_position_ = use.position;
  for (const PlannedTransfer& t : plans_.Due(serial, use.step, use.position)) {
    auto it = tensors_.find(entry->ids[t.tensor]);
    if (it == tensors_.end()) continue;
    TensorRecord& rec = *it->second;
    RecordPlanned(t, rec.spec.name);
    if (t.kind == TransferKind::kLoad) {
      if (rec.has_contents) QueuePrefetch(rec, t.to);
    } else if (PendingLeave leave{rec.id, t.from, t.to, t.kind};
               LeaveTier(rec, leave) == Leave::kBlocked) {
      pending_leaves_.push_back(leave);
    }
  }
  return true;
}

void StoreCore::RetryLeaves(TensorId accessed) {
  std::erase_if(pending_leaves_,
                [&](PendingLeave& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                  if (p.id == accessed) return true;
                  auto it = tensors_.find(p.id);
                  return it == tensors_.end() ||
                         LeaveTier(*it->second, p) == Leave::kDone;
                });
}

// --timeline: a planned transfer as issued, on a "plan" lane beside the
// mover's, as long as the plan expects it to take at the measured bandwidth.
void StoreCore::RecordPlanned(const PlannedTransfer& t,
                              const std::string& name) const {
  if (timeline_ == nullptr) return;
  const absl::Time now = absl::Now();
  if (t.kind == TransferKind::kDrop) {
    timeline_->Record(name, absl::StrFormat("plan drop %s", TierName(t.from)),
                      now, now);
    return;
  }
  const std::array<double, kNumLinks> gbps = mover_->Gbps();
  double seconds = 0;  // over the slowest link it crosses, as planned
  for (Link link : LinksOf(t)) {
    const double bw = gbps[static_cast<int>(link)] * 1e9;
    if (bw > 0) seconds = std::max(seconds, static_cast<double>(t.bytes) / bw);
  }
  timeline_->Record(
      name, absl::StrFormat("plan %s -> %s", TierName(t.from), TierName(t.to)),
      now, now + absl::Seconds(seconds));
}

// The plan takes rec's copy off `leave.from` after its use. A copy
// another valid copy duplicates (or with no contents) is dropped, except
// that a move first makes its copy on `to` (MoveClean); the only copy is
// written back: a move to wherever WriteBackTarget finds room, a
// write-back to its home. Blocked while the copy is leased, waited for, or
// rec is in a transfer (a load reading this copy, say), and a planned drop
// of the only copy (the store never drops data): the caller tries again.
Leave StoreCore::LeaveTier(TensorRecord& rec, PendingLeave& leave) {
  const Tier tier = leave.from;
  TierCopy& c = rec.copy(tier);
  if (rec.is_home(tier) || c.state() != CopyState::kValid) return Leave::kDone;
  if (c.leased() || rec.any_busy() || c.acquires_waiting > 0 ||
      rec.exclusive_pending) {
    return Leave::kBlocked;
  }
  if (!rec.has_contents) {
    DropCopy(rec, tier, /*eviction=*/true);
    return Leave::kDone;
  }
  if (!rec.only_copy(tier)) {
    if (leave.kind == TransferKind::kMove) return MoveClean(rec, leave);
    DropCopy(rec, tier, /*eviction=*/true);
    return Leave::kDone;
  }
  // The plan takes the contents for dead (the model Discards them soon) or
  // for clean (a duplicate not yet dropped): wait for that.
  if (leave.kind == TransferKind::kDrop) return Leave::kBlocked;
  ++companions_in_flight_;  // Shutdown waits for it
  WriteBackAsync(
      rec, tier,
      [this](const absl::Status&) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        --companions_in_flight_;
        Changed();
      },
      /*to_home=*/leave.kind != TransferKind::kMove);
  return Leave::kDone;
}

// A planned move of a copy that is not the only one: the plan keeps the
// contents on `to` to spare an NVMe read later. Once `to` holds them the
// copy is dropped; until then a load to `to` is queued once (from the
// nearest copy: this one). If the load found no room the copy is dropped
// anyway: NVMe or another tier still holds the contents.
Leave StoreCore::MoveClean(TensorRecord& rec, PendingLeave& leave) {
  const TierCopy& target = rec.copy(leave.to);
  if (target.state() == CopyState::kValid ||
      (leave.asked && target.state() == CopyState::kAbsent &&
       !target.prefetch_pending)) {
    DropCopy(rec, leave.from, /*eviction=*/true);
    return Leave::kDone;
  }
  if (!leave.asked) {
    leave.asked = true;
    QueuePrefetch(rec, leave.to);
  }
  return Leave::kBlocked;
}

bool StoreCore::PlanKeeps(const TensorRecord& rec, Tier tier) const {
  if (!options_.scheduler.planned) return false;
  const StepPlans::Entry* entry = plans_.Find(predictor_.current_trace());
  return entry != nullptr &&
         StepPlans::Keeps(*entry, rec.id, tier, plan_position_);
}

uint64_t StoreCore::EvictionDistance(const TensorRecord& rec, Tier tier) const {
  if (options_.scheduler.planned) {
    // A copy a running plan does not keep here now goes first, before any
    // the plan keeps (whose order is Belady's).
    const StepPlans::Entry* entry = plans_.Find(predictor_.current_trace());
    if (entry != nullptr &&
        !StepPlans::Keeps(*entry, rec.id, tier, plan_position_)) {
      return kNoPredictedUse;
    }
  }
  return NextUseDistance(rec);
}

// The plan of the longest step shape, for Stats.
void StoreCore::AddPlanStats(SchedulerStats* s) const {
  s->plans = plans_made_;
  s->planning_seconds = planning_seconds_;
  const StepPlans::Entry* longest = nullptr;
  size_t positions = 0;
  for (uint64_t serial : predictor_.trace_serials()) {
    const StepPlans::Entry* e = plans_.Find(serial);
    if (e != nullptr && e->first_at.size() > positions) {
      positions = e->first_at.size();
      longest = e;
    }
  }
  if (longest == nullptr) return;
  const ResidencyPlan& plan = longest->plan;
  s->planned_link_bytes = plan.link_bytes;
  s->plan_bound_seconds = plan.bound_seconds;
  s->plan_predicted_seconds = plan.predicted_seconds;
}

}  // namespace strata
