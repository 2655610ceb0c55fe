// step_plans.cc: StepPlans.
#include "src/step_plans.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace strata {

bool StepPlans::NeedsPlan(const StepShape& shape) const {
  const Entry* e = Find(shape.serial);
  if (e == nullptr || e->generation != shape.generation) return true;
  if (e->steps >= shape.steps) return false;
  // Then at steps 8, 16, 32, ...: the step's times drift (caches warm, the
  // loads land), and a plan is cheap next to the steps between two.
  return e->steps <= kReplans || std::has_single_bit(shape.steps);
}

void StepPlans::Set(const StepShape& shape, ResidencyPlan plan,
                    std::vector<TensorId> ids) {
  Entry& e = plans_[shape.serial];
  e.generation = shape.generation;
  e.steps = shape.steps;
  e.plan = std::move(plan);
  e.ids = std::move(ids);
  const auto n = static_cast<uint32_t>(shape.trace->size());
  e.first_at.assign(n + 1, 0);
  const std::vector<PlannedTransfer>& ts = e.plan.transfers;
  uint32_t i = 0;
  for (uint32_t p = 0; p <= n; ++p) {
    while (i < ts.size() && ts[i].issue_at < p) ++i;
    e.first_at[p] = i;
  }
  e.index.clear();
  for (uint32_t t = 0; t < e.ids.size(); ++t) e.index[e.ids[t]] = t;
  for (auto& kept : e.kept) kept.assign(e.ids.size(), {});
  const auto keep = [&](uint32_t t, Tier tier, uint32_t from, uint32_t to) {
    if (tier != Tier::kNvme)
      e.kept[static_cast<int>(tier)][t].push_back({from, to});
  };
  for (const PlannedResidency& r : e.plan.residencies) {
    keep(r.tensor, r.tier, r.from, r.whole_step ? r.from + n : r.to);
  }
  for (const PlannedTransfer& t : ts) {
    if (t.kind == TransferKind::kLoad)
      keep(t.tensor, t.to, t.issue_at, t.access);
  }
  if (due_serial_ == shape.serial) due_serial_ = 0;  // positions changed
}

bool StepPlans::Keeps(const Entry& entry, TensorId id, Tier tier,
                      uint32_t position) {
  if (tier == Tier::kNvme) return true;
  auto it = entry.index.find(id);
  if (it == entry.index.end()) return true;
  const auto n = static_cast<uint32_t>(entry.first_at.size() - 1);
  for (const auto& [from, to] :
       entry.kept[static_cast<int>(tier)][it->second]) {
    const uint32_t length = to >= from + n ? n : (to + n - from) % n;
    if ((position + n - from) % n < length) return true;
  }
  return false;
}

const StepPlans::Entry* StepPlans::Find(uint64_t serial) const {
  auto it = plans_.find(serial);
  return it == plans_.end() ? nullptr : &it->second;
}

void StepPlans::Retain(absl::Span<const uint64_t> kept) {
  absl::erase_if(plans_, [&](const auto& entry) {
    return std::find(kept.begin(), kept.end(), entry.first) == kept.end();
  });
}

absl::Span<const PlannedTransfer> StepPlans::Due(uint64_t serial, uint64_t step,
                                                 uint32_t position) {
  const Entry* e = Find(serial);
  if (e == nullptr || position + 1 >= e->first_at.size()) return {};
  if (serial != due_serial_ || step != due_step_) {
    due_serial_ = serial;
    due_step_ = step;
    due_next_ = 0;
  }
  if (position < due_next_) return {};
  const uint32_t from = e->first_at[due_next_];
  const uint32_t to = e->first_at[position + 1];
  due_next_ = position + 1;
  return absl::MakeConstSpan(e->plan.transfers).subspan(from, to - from);
}

}  // namespace strata
