// planner.cc: PlanResidency — validate, place the gaps, time the transfers,
// move gaps off a tier where the transfers' room overflows it, and report
// the plan with its bounds.
#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "scheduler/nvme_floor.h"
#include "scheduler/plan_phases.h"
#include "scheduler/plan_timing.h"
#include "scheduler/residency_plan.h"

namespace strata {
namespace {

absl::Status Validate(const PlanInput& input) {
  const size_t n = input.accesses.size();
  if (n >= UINT32_MAX) return absl::InvalidArgumentError("step too long");
  for (size_t p = 0; p < n; ++p) {
    const PlanAccess& a = input.accesses[p];
    if (a.tensor >= input.tensors.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("access %d names tensor %d of %d", p, a.tensor,
                          input.tensors.size()));
    }
    if (a.hold_end <= p || a.hold_end > n) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "access %d: hold_end %d is not in (%d, %d]", p, a.hold_end, p, n));
    }
    if (a.dies_at >= n && a.dies_at != PlanAccess::kDiesAtRelease &&
        a.dies_at != PlanAccess::kKeptToOverwrite) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "access %d: dies_at %d is not a position of %d", p, a.dies_at, n));
    }
    if (p > 0 && a.at_seconds < input.accesses[p - 1].at_seconds) {
      return absl::InvalidArgumentError(
          absl::StrFormat("access %d: time goes back", p));
    }
  }
  for (double rate : input.link_bytes_per_second) {
    if (!(rate >= 0)) {
      return absl::InvalidArgumentError("a link bandwidth is negative");
    }
  }
  return absl::OkStatus();
}

double Bound(const PlanInput& input, const ResidencyPlan& plan) {
  const auto seconds = [&](uint64_t bytes, Link link) {
    const double rate = input.link_bytes_per_second[static_cast<int>(link)];
    return rate > 0 ? static_cast<double>(bytes) / rate : 0;
  };
  const double nvme = seconds(plan.nvme_read_floor_bytes, Link::kNvmeRead) +
                      seconds(plan.nvme_write_floor_bytes, Link::kNvmeWrite);
  return std::max({input.step_seconds, input.accesses.back().at_seconds, nvme});
}

// Where each gap waits above NVMe, and the tensors that never move.
void Residencies(const PlanModel& model, ResidencyPlan* plan) {
  const size_t n = model.positions();
  std::vector<uint8_t> tiers(model.input().tensors.size(), 0);
  for (const PlanGap& g : model.gaps()) {
    if (!g.live && !g.kept && !g.held) continue;  // dead: nowhere
    if (g.placement == GapPlacement::kNvme) {
      tiers[g.tensor] |= 4;
      continue;
    }
    tiers[g.tensor] |= 1u << static_cast<int>(g.placement);
    if (g.length == 0) continue;
    plan->residencies.push_back({.tensor = g.tensor,
                                 .tier = TierOf(g.placement),
                                 .from = g.begin,
                                 .to = g.end,
                                 .whole_step = g.length >= n});
  }
  std::vector<uint8_t> moves(tiers.size(), 0);
  for (const PlannedTransfer& t : plan->transfers) {
    if (t.kind != TransferKind::kDrop) moves[t.tensor] = 1;
  }
  for (uint32_t t = 0; t < tiers.size(); ++t) {
    if (moves[t] != 0) continue;
    if (tiers[t] == 1) plan->stays_device.push_back(t);
    if (tiers[t] == 2) plan->stays_host.push_back(t);
  }
}

}  // namespace

std::string_view TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kLoad:
      return "load";
    case TransferKind::kMove:
      return "move";
    case TransferKind::kWriteBack:
      return "write-back";
    case TransferKind::kDrop:
      return "drop";
  }
  return "?";
}

absl::StatusOr<ResidencyPlan> PlanResidency(const PlanInput& input) {
  if (absl::Status s = Validate(input); !s.ok()) return s;
  ResidencyPlan plan;
  if (input.accesses.empty()) return plan;
  PlanModel model(input);
  for (Tier tier : {Tier::kDevice, Tier::kHost}) {
    const int64_t leases = model.profile(tier).Max();  // and homes
    const auto cap = static_cast<int64_t>(model.capacity(tier));
    plan.overflow_bytes[static_cast<int>(tier)] =
        leases > cap ? static_cast<uint64_t>(leases - cap) : 0;
  }
  PlaceGaps(model);
  TimeTransfers(model, &plan);
  ClipLoadWindows(model, &plan);
  HoldLoads(model, plan, +1);
  for (Tier tier : {Tier::kDevice, Tier::kHost}) {
    plan.peak_bytes[static_cast<int>(tier)] =
        static_cast<uint64_t>(std::max<int64_t>(0, model.profile(tier).Max()));
  }
  HoldLoads(model, plan, -1);
  Residencies(model, &plan);
  const NvmeFloors floors = NvmeFloorBytes(model);
  plan.nvme_read_floor_bytes = floors.read_bytes;
  plan.nvme_write_floor_bytes = floors.write_bytes;
  plan.bound_seconds = Bound(input, plan);
  return plan;
}

}  // namespace strata
