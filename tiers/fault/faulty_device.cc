// faulty_device.cc: FaultyDevice, seeded copy-fault injection in front of any
// device backend (policy in faulty_device.h).
#include "tiers/fault/faulty_device.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "strata/status.h"

namespace strata {

namespace {

const char* KindName(CopyKind kind) {
  if (kind == CopyKind::kD2D) return "D2D";
  return kind == CopyKind::kH2D ? "H2D" : "D2H";
}

GateOp HintGate(MemLocation to, bool fault) {
  if (to == MemLocation::kDevice) {
    return fault ? GateOp::kFaultToDevice : GateOp::kPrefetchToDevice;
  }
  return fault ? GateOp::kFaultToHost : GateOp::kPrefetchToHost;
}

}  // namespace

FaultyDevice::FaultyDevice(std::unique_ptr<DeviceBackend> inner,
                           const FaultSpec& spec)
    : inner_(std::move(inner)) {
  set_spec(spec);
}

void FaultyDevice::set_spec(const FaultSpec& spec) {
  MutexLock lock(&mu_);
  spec_ = spec;
  draws_.Reset(spec);
}

uint64_t FaultyDevice::injected() const {
  MutexLock lock(&mu_);
  return injected_;
}

bool FaultyDevice::ShouldFail(CopyKind kind, uint64_t* ordinal, bool* torn) {
  MutexLock lock(&mu_);
  // Device-to-device copies fail only where asked for by name (kD2D): they
  // do not cross the link.
  const bool ops = (spec_.ops == FaultOps::kAll && kind != CopyKind::kD2D) ||
                   (spec_.ops == FaultOps::kH2D && kind == CopyKind::kH2D) ||
                   (spec_.ops == FaultOps::kD2H && kind == CopyKind::kD2H) ||
                   (spec_.ops == FaultOps::kD2D && kind == CopyKind::kD2D);
  const bool kind_applies =
      spec_.kind == FaultKind::kEio || spec_.kind == FaultKind::kTornCopy;
  if (!ops || !kind_applies) return false;
  const bool fail = draws_.NextFails(spec_);
  *ordinal = draws_.matched();
  *torn = spec_.kind == FaultKind::kTornCopy;
  if (fail) ++injected_;
  return fail;
}

// An event FaultyDevice recorded: the wrapped backend's, seen through the
// gate's kEventWait (see gate.h).
class FaultyDevice::GatedEvent : public DeviceEvent {
 public:
  GatedEvent(std::shared_ptr<DeviceEvent> inner, Gate* gate)
      : inner_(std::move(inner)), gate_(gate) {}
  absl::Status Synchronize() override {
    gate_->Pass(GateOp::kEventWait);
    return inner_->Synchronize();
  }
  bool Done() override {
    return !gate_->armed(GateOp::kEventWait) && inner_->Done();
  }
  DeviceEvent* inner() const { return inner_.get(); }

 private:
  const std::shared_ptr<DeviceEvent> inner_;
  Gate* const gate_;
};

DeviceEvent* FaultyDevice::Inner(DeviceEvent* event) {
  auto* gated = dynamic_cast<GatedEvent*>(event);
  return gated == nullptr ? event : gated->inner();
}

std::optional<absl::Status> FaultyDevice::CopyFault(CopyKind kind, void* dst,
                                                    const void* src,
                                                    uint64_t bytes,
                                                    DeviceEvent* after) {
  if (kind != CopyKind::kD2D) {
    gate_.Pass(kind == CopyKind::kH2D ? GateOp::kH2D : GateOp::kD2H);
  }
  uint64_t ordinal = 0;
  bool torn = false;
  if (!ShouldFail(kind, &ordinal, &torn)) return std::nullopt;
  const uint64_t prefix = torn ? bytes / 2 : 0;
  if (prefix > 0) {
    STRATA_RETURN_IF_ERROR(inner_->Copy(kind, dst, src, prefix, Inner(after)));
  }
  return absl::InternalError(
      absl::StrCat("injected copy fault: ", KindName(kind), " copy #", ordinal,
                   " of ", bytes, " bytes (first ", prefix, " bytes copied)"));
}

absl::Status FaultyDevice::Copy(CopyKind kind, void* dst, const void* src,
                                uint64_t bytes, DeviceEvent* after) {
  if (std::optional<absl::Status> fault =
          CopyFault(kind, dst, src, bytes, after)) {
    return *fault;
  }
  return inner_->Copy(kind, dst, src, bytes, Inner(after));
}

namespace {

// A copy that failed after it was queued: happened, with an error.
class FailedEvent : public DeviceEvent {
 public:
  explicit FailedEvent(absl::Status error) : error_(std::move(error)) {}
  absl::Status Synchronize() override { return error_; }
  bool Done() override { return true; }

 private:
  const absl::Status error_;
};

}  // namespace

void FaultyDevice::set_late_copy_faults(bool late) {
  MutexLock lock(&mu_);
  late_copy_faults_ = late;
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> FaultyDevice::CopyAsync(
    CopyKind kind, void* dst, const void* src, uint64_t bytes,
    DeviceEvent* after) {
  std::shared_ptr<DeviceEvent> event;
  if (std::optional<absl::Status> fault =
          CopyFault(kind, dst, src, bytes, after)) {
    bool late = false;
    {
      MutexLock lock(&mu_);
      late = late_copy_faults_;
    }
    if (!late) return *fault;
    event = std::make_shared<FailedEvent>(*std::move(fault));
  } else {
    STRATA_ASSIGN_OR_RETURN(
        event, inner_->CopyAsync(kind, dst, src, bytes, Inner(after)));
  }
  return std::shared_ptr<DeviceEvent>(
      std::make_shared<GatedEvent>(std::move(event), &gate_));
}

absl::StatusOr<std::byte*> FaultyDevice::ReserveArena(uint64_t bytes) {
  return inner_->ReserveArena(bytes);
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> FaultyDevice::RecordEvent(
    void* stream) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<DeviceEvent> event,
                          inner_->RecordEvent(stream));
  return std::shared_ptr<DeviceEvent>(
      std::make_shared<GatedEvent>(std::move(event), &gate_));
}

absl::Status FaultyDevice::StreamWait(void* stream, DeviceEvent& event) {
  return inner_->StreamWait(stream, *Inner(&event));
}

absl::Status FaultyDevice::RegisterHost(void* ptr, uint64_t bytes) {
  return inner_->RegisterHost(ptr, bytes);
}

absl::Status FaultyDevice::UnregisterHost(void* ptr, uint64_t bytes) {
  return inner_->UnregisterHost(ptr, bytes);
}

absl::StatusOr<DeviceMemInfo> FaultyDevice::GetMemInfo() {
  return inner_->GetMemInfo();
}

absl::StatusOr<std::byte*> FaultyDevice::ReserveManaged(uint64_t bytes) {
  return inner_->ReserveManaged(bytes);
}

absl::Status FaultyDevice::MaybeFailHint(MemLocation to,
                                         std::string_view what) {
  const CopyKind kind =
      to == MemLocation::kDevice ? CopyKind::kH2D : CopyKind::kD2H;
  uint64_t ordinal = 0;
  bool torn = false;
  if (!ShouldFail(kind, &ordinal, &torn)) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("injected copy fault: ", KindName(kind), " ",
                   std::string(what), " #", ordinal, " (nothing moved)"));
}

absl::Status FaultyDevice::PrefetchManaged(
    absl::Span<const ManagedRange> ranges, MemLocation to, bool discard,
    DeviceEvent* after) {
  gate_.Pass(HintGate(to, /*fault=*/false));
  STRATA_RETURN_IF_ERROR(MaybeFailHint(to, "prefetch"));
  return inner_->PrefetchManaged(ranges, to, discard, Inner(after));
}

absl::Status FaultyDevice::DiscardManaged(
    absl::Span<const ManagedRange> ranges) {
  gate_.Pass(GateOp::kDiscard);
  return inner_->DiscardManaged(ranges);
}

absl::Status FaultyDevice::AdviseManaged(const ManagedRange& range,
                                         ManagedAdvice advice) {
  return inner_->AdviseManaged(range, advice);
}

absl::Status FaultyDevice::ServeFault(const ManagedRange& range,
                                      MemLocation to) {
  gate_.Pass(HintGate(to, /*fault=*/true));
  STRATA_RETURN_IF_ERROR(MaybeFailHint(to, "page fault"));
  return inner_->ServeFault(range, to);
}

}  // namespace strata
