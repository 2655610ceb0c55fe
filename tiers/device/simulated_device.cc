// simulated_device.cc: SimulatedDevice, host memory standing in for a GPU
// (policy in simulated_device.h).
#include "tiers/device/simulated_device.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/system_info.h"
#include "strata/status.h"
#include "tiers/device/sim_copy_engine.h"

namespace strata {
namespace {

// `bytes` of zeroed host memory. mmap is page-aligned (more than the 256
// bytes promised) and lazily backed, so an unused budget costs no memory.
absl::StatusOr<std::byte*> MapZeroed(uint64_t bytes, const char* what) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", bytes, " bytes of simulated ", what, ": ",
                     absl::ErrnoToStatus(errno, "mmap").message()));
  }
  return static_cast<std::byte*>(p);
}

// Kernels on the simulated device are CPU code that has already run.
class SimEvent : public DeviceEvent {
 public:
  absl::Status Synchronize() override { return absl::OkStatus(); }
  bool Done() override { return true; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SimulatedDevice>> SimulatedDevice::Create(
    const DeviceOptions& options, Clock* clock) {
  if (options.copy_chunk_bytes == 0) {
    return absl::InvalidArgumentError("copy_chunk_bytes must be > 0");
  }
  if (options.sim_link_gbps < 0 || options.sim_latency_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulated link model must not be negative: sim_link_gbps=",
        options.sim_link_gbps,
        ", sim_latency_seconds=", options.sim_latency_seconds));
  }
  return std::unique_ptr<SimulatedDevice>(
      new SimulatedDevice(options, clock ? clock : &Clock::Real()));
}

SimulatedDevice::SimulatedDevice(const DeviceOptions& options, Clock* clock)
    : options_(options),
      h2d_(std::make_unique<SimCopyEngine>(options.copy_chunk_bytes,
                                           options.sim_link_gbps,
                                           options.sim_latency_seconds, clock)),
      d2h_(std::make_unique<SimCopyEngine>(
          options.copy_chunk_bytes, options.sim_link_gbps,
          options.sim_latency_seconds, clock)) {}

SimulatedDevice::~SimulatedDevice() {
  h2d_->Shutdown();
  d2h_->Shutdown();
  MutexLock lock(&mu_);
  if (arena_ != nullptr) munmap(arena_, reserved_bytes_);
  if (managed_ != nullptr) munmap(managed_, managed_bytes_);
}

absl::StatusOr<std::byte*> SimulatedDevice::ReserveArena(uint64_t bytes) {
  MutexLock lock(&mu_);
  if (arena_ != nullptr) {
    return absl::FailedPreconditionError(
        "the simulated device arena is already reserved");
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError("device arena size must be > 0");
  }
  if (bytes > options_.budget_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "asked for ", bytes, " bytes of simulated device memory; the device ",
        "budget is ", options_.budget_bytes, " bytes: raise --device-budget"));
  }
  STRATA_ASSIGN_OR_RETURN(arena_, MapZeroed(bytes, "device memory"));
  reserved_bytes_ = bytes;
  return arena_;
}

absl::Status SimulatedDevice::CheckDeviceRange(const void* ptr,
                                               uint64_t bytes) const {
  MutexLock lock(&mu_);
  const auto* p = static_cast<const std::byte*>(ptr);
  if (arena_ == nullptr || p < arena_ || p > arena_ + reserved_bytes_ ||
      bytes > static_cast<uint64_t>(arena_ + reserved_bytes_ - p)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device range [", absl::Hex(ptr), ", +", bytes,
                     ") is not inside the simulated device arena"));
  }
  return absl::OkStatus();
}

absl::Status SimulatedDevice::Copy(CopyKind kind, void* dst, const void* src,
                                   uint64_t bytes, DeviceEvent* /*after*/) {
  // `after` is complete at once on this device.
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError("null pointer passed to Copy");
  }
  const bool linked =
      options_.sim_link_gbps > 0 || options_.sim_latency_seconds > 0;
  if (kind == CopyKind::kH2D) {
    STRATA_RETURN_IF_ERROR(CheckDeviceRange(dst, bytes));
    if (!linked) return Memcpy(dst, src, bytes);
    return h2d_->Copy(dst, src, bytes);
  }
  if (kind == CopyKind::kD2D) {  // device memory bandwidth: no link model
    STRATA_RETURN_IF_ERROR(CheckDeviceRange(dst, bytes));
    STRATA_RETURN_IF_ERROR(CheckDeviceRange(src, bytes));
    std::memmove(dst, src, bytes);  // may overlap within the arena
    return absl::OkStatus();
  }
  STRATA_RETURN_IF_ERROR(CheckDeviceRange(src, bytes));
  if (!linked) return Memcpy(dst, src, bytes);
  return d2h_->Copy(dst, src, bytes);
}

absl::Status SimulatedDevice::Memcpy(void* dst, const void* src,
                                     uint64_t bytes) {
  std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> SimulatedDevice::RecordEvent(
    void* /*stream*/) {
  return std::shared_ptr<DeviceEvent>(std::make_shared<SimEvent>());
}

absl::Status SimulatedDevice::StreamWait(void* /*stream*/,
                                         DeviceEvent& /*event*/) {
  return absl::OkStatus();
}

absl::Status SimulatedDevice::RegisterHost(void* /*ptr*/, uint64_t /*bytes*/) {
  return absl::OkStatus();
}

absl::Status SimulatedDevice::UnregisterHost(void* /*ptr*/,
                                             uint64_t /*bytes*/) {
  return absl::OkStatus();
}

absl::StatusOr<DeviceMemInfo> SimulatedDevice::GetMemInfo() {
  MutexLock lock(&mu_);
  DeviceMemInfo info;
  info.total_bytes = options_.sim_memory_bytes;
  if (info.total_bytes == 0) info.total_bytes = PhysicalMemoryBytes();
  if (info.total_bytes == 0) info.total_bytes = options_.budget_bytes;
  const uint64_t used = reserved_bytes_ + managed_bytes_;
  info.free_bytes = info.total_bytes > used ? info.total_bytes - used : 0;
  return info;
}

absl::StatusOr<std::byte*> SimulatedDevice::ReserveManaged(uint64_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("managed memory size must be > 0");
  }
  {
    MutexLock lock(&mu_);
    if (managed_ != nullptr) {
      return absl::FailedPreconditionError(
          "the simulated device's managed memory is already reserved");
    }
  }
  STRATA_ASSIGN_OR_RETURN(DeviceMemInfo info, GetMemInfo());
  if (absl::Status fits = CheckManagedFits(bytes, info, "the simulated device");
      !fits.ok()) {
    return absl::Status(
        fits.code(),
        absl::StrCat(fits.message(),
                     " (the simulated GPU's memory is --sim-memory, default "
                     "this machine's RAM)"));
  }
  STRATA_ASSIGN_OR_RETURN(std::byte * p, MapZeroed(bytes, "managed memory"));
  MutexLock lock(&mu_);
  managed_ = p;
  managed_bytes_ = bytes;
  return managed_;
}

absl::Status SimulatedDevice::CheckManagedRange(
    const ManagedRange& range) const {
  MutexLock lock(&mu_);
  if (managed_ == nullptr || range.ptr < managed_ ||
      range.ptr > managed_ + managed_bytes_ ||
      range.bytes >
          static_cast<uint64_t>(managed_ + managed_bytes_ - range.ptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("range [", absl::Hex(range.ptr), ", +", range.bytes,
                     ") is not inside the simulated managed memory"));
  }
  return absl::OkStatus();
}

absl::Status SimulatedDevice::OccupyLink(MemLocation to,
                                         const ManagedRange& range) {
  const bool linked =
      options_.sim_link_gbps > 0 || options_.sim_latency_seconds > 0;
  if (!linked || range.bytes == 0) return absl::OkStatus();
  // The engine copies the range onto itself (memmove: a no-op in effect)
  // while holding the link for its bytes.
  SimCopyEngine& engine = to == MemLocation::kDevice ? *h2d_ : *d2h_;
  return engine.Copy(range.ptr, range.ptr, range.bytes);
}

absl::Status SimulatedDevice::PrefetchManaged(
    absl::Span<const ManagedRange> ranges, MemLocation to, bool discard,
    DeviceEvent* /*after*/) {
  for (const ManagedRange& range : ranges) {
    STRATA_RETURN_IF_ERROR(CheckManagedRange(range));
  }
  if (discard) return absl::OkStatus();  // dead contents: nothing crosses
  for (const ManagedRange& range : ranges) {
    STRATA_RETURN_IF_ERROR(OccupyLink(to, range));
  }
  return absl::OkStatus();
}

absl::Status SimulatedDevice::DiscardManaged(
    absl::Span<const ManagedRange> ranges) {
  for (const ManagedRange& range : ranges) {
    STRATA_RETURN_IF_ERROR(CheckManagedRange(range));
  }
  return absl::OkStatus();
}

absl::Status SimulatedDevice::AdviseManaged(const ManagedRange& range,
                                            ManagedAdvice /*advice*/) {
  return CheckManagedRange(range);
}

absl::Status SimulatedDevice::ServeFault(const ManagedRange& range,
                                         MemLocation to) {
  STRATA_RETURN_IF_ERROR(CheckManagedRange(range));
  return OccupyLink(to, range);
}

}  // namespace strata
