// faulty_device.cc: FaultyDevice, seeded copy-fault injection in front of any
// device backend (policy in faulty_device.h).
#include "tiers/fault/faulty_device.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "strata/status.h"

namespace strata {

FaultyDevice::FaultyDevice(std::unique_ptr<DeviceBackend> inner,
                           const CopyFaultSpec& spec)
    : inner_(std::move(inner)) {
  set_spec(spec);
}

void FaultyDevice::set_spec(const CopyFaultSpec& spec) {
  MutexLock lock(&mu_);
  spec_ = spec;
  rng_.seed(spec.seed);
  eligible_ = 0;
}

uint64_t FaultyDevice::injected() const {
  MutexLock lock(&mu_);
  return injected_;
}

bool FaultyDevice::ShouldFail(CopyKind kind, uint64_t* ordinal,
                              bool* copy_prefix) {
  MutexLock lock(&mu_);
  // Device-to-device copies are not injected: they do not cross the link.
  const bool eligible = kind == CopyKind::kH2D   ? spec_.h2d
                        : kind == CopyKind::kD2H ? spec_.d2h
                                                 : false;
  if (!eligible) return false;
  *ordinal = ++eligible_;
  *copy_prefix = spec_.copy_prefix;
  bool fail = spec_.fail_nth != 0 && *ordinal == spec_.fail_nth;
  if (spec_.rate > 0) {
    // Draw for every eligible copy so the stream does not depend on fail_nth.
    const bool draw =
        std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < spec_.rate;
    fail = fail || draw;
  }
  if (fail) ++injected_;
  return fail;
}

absl::Status FaultyDevice::Copy(CopyKind kind, void* dst, const void* src,
                                uint64_t bytes, DeviceEvent* after) {
  uint64_t ordinal = 0;
  bool copy_prefix = false;
  if (!ShouldFail(kind, &ordinal, &copy_prefix)) {
    return inner_->Copy(kind, dst, src, bytes, after);
  }
  const uint64_t prefix = copy_prefix ? bytes / 2 : 0;
  if (prefix > 0) {
    STRATA_RETURN_IF_ERROR(inner_->Copy(kind, dst, src, prefix, after));
  }
  return absl::InternalError(absl::StrCat(
      "injected copy fault: ", kind == CopyKind::kH2D ? "H2D" : "D2H",
      " copy #", ordinal, " of ", bytes, " bytes (first ", prefix,
      " bytes copied)"));
}

absl::StatusOr<std::byte*> FaultyDevice::ReserveArena(uint64_t bytes) {
  return inner_->ReserveArena(bytes);
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> FaultyDevice::RecordEvent(
    void* stream) {
  return inner_->RecordEvent(stream);
}

absl::Status FaultyDevice::StreamWait(void* stream, DeviceEvent& event) {
  return inner_->StreamWait(stream, event);
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
  bool copy_prefix = false;
  if (!ShouldFail(kind, &ordinal, &copy_prefix)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "injected copy fault: ", kind == CopyKind::kH2D ? "H2D" : "D2H", " ",
      std::string(what), " #", ordinal, " (nothing moved)"));
}

absl::Status FaultyDevice::PrefetchManaged(
    absl::Span<const ManagedRange> ranges, MemLocation to, bool discard,
    DeviceEvent* after) {
  STRATA_RETURN_IF_ERROR(MaybeFailHint(to, "prefetch"));
  return inner_->PrefetchManaged(ranges, to, discard, after);
}

absl::Status FaultyDevice::DiscardManaged(
    absl::Span<const ManagedRange> ranges) {
  return inner_->DiscardManaged(ranges);
}

absl::Status FaultyDevice::AdviseManaged(const ManagedRange& range,
                                         ManagedAdvice advice) {
  return inner_->AdviseManaged(range, advice);
}

absl::Status FaultyDevice::ServeFault(const ManagedRange& range,
                                      MemLocation to) {
  STRATA_RETURN_IF_ERROR(MaybeFailHint(to, "page fault"));
  return inner_->ServeFault(range, to);
}

}  // namespace strata
