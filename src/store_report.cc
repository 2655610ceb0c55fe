// store_report.cc: what StoreCore reports — a tensor's spec and residency,
// the Stats counters, and the tiers' description for `strata info`.
#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/byte_size.h"
#include "scheduler/nvme_floor.h"
#include "src/store_core.h"
#include "strata/status.h"

namespace strata {
namespace {

// A size for messages: binary units, with the exact byte count when the
// rounded figure would hide it ("4.0 MiB (4194307 bytes)").
std::string Bytes(uint64_t n) {
  const std::string rounded = FormatByteSize(n);
  if (n < 1024 || absl::StrCat(n / 1024 / 1024, " MiB") == rounded ||
      absl::StrCat(n / 1024, " KiB") == rounded) {
    return rounded;
  }
  return absl::StrFormat("%s (%d bytes)", rounded, n);
}

std::string_view BudgetFlag(Tier tier) {
  switch (tier) {
    case Tier::kDevice:
      return "--device-budget";
    case Tier::kHost:
      return "--host-budget";
    case Tier::kNvme:
      return "--nvme-budget";
  }
  return "";
}

}  // namespace

absl::StatusOr<TensorSpec> StoreCore::GetSpec(TensorId id) const {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
  return rec->spec;
}

absl::StatusOr<Residency> StoreCore::GetResidency(TensorId id) const {
  MutexLock lock(&mu_);
  STRATA_ASSIGN_OR_RETURN(TensorRecord * rec, Find(id));
  Residency r;
  for (int t = 0; t < kNumTiers; ++t) {
    switch (rec->copies[t].state()) {
      case CopyState::kAbsent:
        r.tiers[t] = Residency::State::kAbsent;
        break;
      case CopyState::kLoading:
        r.tiers[t] = Residency::State::kLoading;
        break;
      case CopyState::kEvicting:
        r.tiers[t] = Residency::State::kEvicting;
        break;
      case CopyState::kValid:
        r.tiers[t] = rec->dirty(static_cast<Tier>(t)) &&
                             t != static_cast<int>(rec->spec.home)
                         ? Residency::State::kDirty
                         : Residency::State::kClean;
        break;
    }
  }
  r.has_contents = rec->has_contents;
  r.leases = static_cast<int>(rec->leases.size());
  return r;
}

NvmeFloors StoreCore::Floors() const {
  if (tiers_.nvme == nullptr) return {};
  // Training steps call GetStats twice each, with mu_ held: the floors are
  // recomputed only when a shape is recorded or learns an access kind (its
  // generation), or has run 1, 2, 4, 8, ... steps (its leases and discards
  // are learned as it replays), as its plans are.
  std::vector<StepShape> shapes;
  uint64_t key = predictor_.stats().traces_recorded;
  for (uint64_t serial : predictor_.trace_serials()) {
    std::optional<StepShape> shape = predictor_.Shape(serial);
    if (!shape.has_value()) continue;
    key = key * 1000003 + shape->generation * 64 + std::bit_width(shape->steps);
    shapes.push_back(*std::move(shape));
  }
  if (floor_key_ == key) return floors_;
  NvmeFloors most;
  for (const StepShape& shape : shapes) {
    NvmeFloors f;
    std::vector<TensorId> ids;
    // The plan made from this very shape has them already.
    if (const StepPlans::Entry* e = plans_.Find(shape.serial);
        e != nullptr && e->generation == shape.generation &&
        e->steps == shape.steps) {
      f = {e->plan.nvme_read_floor_bytes, e->plan.nvme_write_floor_bytes};
    } else if (PlanInput input; BuildPlanInput(shape, &input, &ids)) {
      // Unified memory: device copies are host pages, so only host memory
      // holds bytes above NVMe.
      if (unified()) input.capacity[static_cast<int>(Tier::kDevice)] = 0;
      f = NvmeFloorBytes(input);
    }
    most.read_bytes = std::max(most.read_bytes, f.read_bytes);
    most.write_bytes = std::max(most.write_bytes, f.write_bytes);
  }
  floor_key_ = key;
  floors_ = most;
  return most;
}

Stats StoreCore::GetStats() const {
  Stats s;
  mover_->AddTo(&s);
  MutexLock lock(&mu_);
  for (int t = 0; t < kNumTiers; ++t) {
    const ExtentAllocator& a = *alloc_[t];
    TierStats& ts = s.tiers[t];
    ts.capacity_bytes = a.capacity();
    ts.used_bytes = a.used_bytes();
    ts.peak_used_bytes = a.peak_used_bytes();
    ts.leased_bytes = leased_bytes_[t];
    ts.allocations = a.allocations();
    ts.frees = a.frees();
    ts.evictions = evictions_[t];
    ts.compactions = compactions_[t];
    ts.relocated_bytes = relocated_bytes_[t];
  }
  s.prefetch = prefetch_;
  const PredictorStats& p = predictor_.stats();
  s.scheduler = {.steps = p.steps,
                 .accesses = p.events,
                 .hits = p.hits,
                 .resyncs = p.resyncs,
                 .misses = p.misses,
                 .rerecords = p.rerecords};
  const NvmeFloors floors = Floors();
  s.scheduler.nvme_read_floor_bytes = floors.read_bytes;
  s.scheduler.nvme_write_floor_bytes = floors.write_bytes;
  AddPlanStats(&s.scheduler);
  s.acquires = acquires_;
  s.write_backs = write_backs_;
  s.stall_seconds = stall_seconds_;
  s.room_seconds = room_seconds_;
  s.stalled_acquires = stalled_acquires_;
  s.device_reader_waits = device_reader_waits_;
  s.queued_loads = queued_loads_total_;
  s.queued_loads_in_flight = static_cast<uint64_t>(queued_loads_);
  s.tensors = tensors_.size();
  s.unified = unified_;
  s.device_backend = tiers_.device->name();
  s.device_memory = !unified()                      ? "copies"
                    : options_.device.unified_hints ? "unified"
                                                    : "unified-no-hints";
  s.io_engine = tiers_.nvme ? std::string(tiers_.nvme->engine_name()) : "none";
  return s;
}

std::string StoreCore::DescribeTiers() const {
  std::string out =
      absl::StrFormat("device: %s (%s), budget %s%s\n", tiers_.device->name(),
                      tiers_.device_why, FormatByteSize(capacity_[0]),
                      !unified() ? ""
                      : options_.device.unified_hints
                          ? " resident; unified memory with prefetch hints"
                          : " resident; unified memory, no hints (faults)");
  if (tiers_.host->managed()) {
    absl::StrAppendFormat(&out,
                          "host:   managed memory %s (preferred location host, "
                          "accessed by the device)\n",
                          FormatByteSize(capacity_[1]));
  } else {
    absl::StrAppendFormat(
        &out, "host:   pinned arena %s (mlock %s, %s)\n",
        FormatByteSize(capacity_[1]), tiers_.host->locked() ? "ok" : "refused",
        tiers_.host->registered() ? "registered with CUDA" : "not registered");
  }
  if (!tiers_.nvme) {
    absl::StrAppend(&out, "nvme:   none (no --nvme-dir)\n");
    return out;
  }
  absl::StrAppendFormat(
      &out, "nvme:   %s in %s; engine %s%s, queue depth %d, block %s\n",
      FormatByteSize(capacity_[2]),
      absl::StrJoin(tiers_.nvme->DescribeFiles(), ", "),
      tiers_.nvme->engine_name(),
      tiers_.nvme->fallback_reason().empty()
          ? ""
          : absl::StrCat(" (", tiers_.nvme->fallback_reason(), ")"),
      options_.nvme.queue_depth,
      FormatByteSize(options_.nvme.block_size_bytes));
  return out;
}

absl::Status StoreCore::WriteTimeline(const std::string& path) const {
  if (timeline_ == nullptr) {
    return absl::FailedPreconditionError(
        "the timeline is off: open the store with StoreOptions::timeline = "
        "true (--timeline=FILE)");
  }
  return timeline_->WriteChromeTrace(path);
}

// The error of a tensor larger than a tier's whole budget.
absl::Status StoreCore::TooLarge(Tier tier, uint64_t bytes,
                                 const TensorSpec& spec) const {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "tensor '%s' is %s; the %s budget is %s: raise %s or split the tensor",
      spec.name, Bytes(bytes), TierName(tier),
      Bytes(capacity_[static_cast<int>(tier)]), BudgetFlag(tier)));
}

// The error of a tier that cannot make room: what holds it, largest first.
absl::Status StoreCore::TierFull(Tier tier, uint64_t bytes,
                                 const TensorSpec& spec) const {
  struct Holder {
    uint64_t bytes;
    std::string what;
  };
  std::vector<Holder> holders;
  for (const auto& [id, rec] : tensors_) {
    const TierCopy& c = rec->copy(tier);
    if (!c.extent) continue;
    std::string why = rec->is_home(tier) ? "home" : "cache";
    if (c.read_leases > 0)
      absl::StrAppend(&why, ", ", c.read_leases, " read lease(s)");
    if (c.write_lease) absl::StrAppend(&why, ", write lease");
    if (c.busy()) absl::StrAppend(&why, ", in transfer");
    if (unified() && tier == Tier::kHost &&
        rec->copy(Tier::kDevice).state() != CopyState::kAbsent) {
      // Unified memory: these pages are also the device copy.
      absl::StrAppend(&why, rec->copy(Tier::kDevice).leased()
                                ? ", leased on the device"
                                : ", resident on the device");
    }
    holders.push_back({c.extent->bytes,
                       absl::StrFormat("'%s' (id %d, %s, %s)", rec->spec.name,
                                       id.value, Bytes(c.extent->bytes), why)});
  }
  std::sort(holders.begin(), holders.end(),
            [](const Holder& a, const Holder& b) { return a.bytes > b.bytes; });
  std::vector<std::string> top;
  for (size_t i = 0; i < holders.size() && i < 8; ++i)
    top.push_back(holders[i].what);
  const ExtentAllocator& a = *alloc_[static_cast<int>(tier)];
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s tier full: tensor '%s' needs %s; %s of %s in use (largest free "
      "range %s) and nothing can be evicted. Held by: %s%s. Release leases, "
      "Destroy or Discard tensors, or raise %s",
      TierName(tier), spec.name, Bytes(bytes), Bytes(a.used_bytes()),
      Bytes(a.capacity()), Bytes(a.largest_free_bytes()),
      absl::StrJoin(top, "; "),
      holders.size() > top.size()
          ? absl::StrFormat(" and %d more", holders.size() - top.size())
          : "",
      BudgetFlag(tier)));
}

}  // namespace strata
