// device_backend.cc: OpenDeviceBackend, which picks the device backend.
//
// Policy: an explicit DeviceOptions::backend (kCuda, kSimulated) wins; under
// kAuto, STRATA_DEVICE=cuda|simulated|auto picks instead.
// kAuto takes the GPU when one answers and the simulated device otherwise,
// saying why in `*why`; kCuda without a GPU fails (FailedPrecondition) rather
// than silently simulating. CUDA symbols are referenced only when built with
// CUDA (STRATA_HAVE_CUDA), so this file links without the toolkit.
#include "tiers/device/device_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "tiers/device/simulated_device.h"
#ifdef STRATA_HAVE_CUDA
#include "tiers/device/cuda_device.h"
#endif

namespace strata {
namespace {

// The backend kind: an explicit request, else STRATA_DEVICE, else kAuto.
absl::StatusOr<DeviceBackendKind> ResolveKind(DeviceBackendKind requested) {
  if (requested != DeviceBackendKind::kAuto) return requested;
  const char* env = std::getenv("STRATA_DEVICE");
  if (env == nullptr || *env == '\0') return requested;
  return ParseDeviceBackend(env, "STRATA_DEVICE");
}

void SetWhy(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenSimulated(
    const DeviceOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SimulatedDevice> device,
                          SimulatedDevice::Create(options));
  return std::unique_ptr<DeviceBackend>(std::move(device));
}

// Opens the GPU, or says why there is none: FailedPrecondition.
absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenCuda(
    const DeviceOptions& options, std::string* why) {
#ifdef STRATA_HAVE_CUDA
  STRATA_ASSIGN_OR_RETURN(std::string description,
                          ProbeCudaDevice(options.cuda_device));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                          CudaDevice::Create(options));
  SetWhy(why, std::move(description));
  return std::unique_ptr<DeviceBackend>(std::move(device));
#else
  (void)options;
  (void)why;
  return absl::FailedPreconditionError(
      "no CUDA device (strata was built without CUDA)");
#endif
}

// An event that has happened: a copy the CPU already made.
class HappenedEvent : public DeviceEvent {
 public:
  absl::Status Synchronize() override { return absl::OkStatus(); }
  bool Done() override { return true; }
};

}  // namespace

absl::StatusOr<std::shared_ptr<DeviceEvent>> DeviceBackend::CopyAsync(
    CopyKind kind, void* dst, const void* src, uint64_t bytes,
    DeviceEvent* after) {
  STRATA_RETURN_IF_ERROR(Copy(kind, dst, src, bytes, after));
  return std::shared_ptr<DeviceEvent>(std::make_shared<HappenedEvent>());
}

absl::StatusOr<double> DeviceBackend::TimeCopies(CopyKind kind, void* dst,
                                                 const void* src,
                                                 uint64_t bytes,
                                                 uint64_t repeats) {
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t r = 0; r < repeats; ++r) {
    STRATA_RETURN_IF_ERROR(Copy(kind, dst, src, bytes));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenDeviceBackend(
    const DeviceOptions& options, std::string* why) {
  STRATA_ASSIGN_OR_RETURN(DeviceBackendKind kind, ResolveKind(options.backend));
  switch (kind) {
    case DeviceBackendKind::kSimulated:
      SetWhy(why, "simulated device requested");
      return OpenSimulated(options);
    case DeviceBackendKind::kCuda: {
      auto device = OpenCuda(options, why);
      if (absl::IsFailedPrecondition(device.status())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "CUDA device requested but ", device.status().message(),
            ": run on a machine with a GPU, or choose the simulated device "
            "(--device=simulated, or DeviceOptions::backend = kSimulated)"));
      }
      return device;
    }
    case DeviceBackendKind::kAuto:
      break;
  }
  auto device = OpenCuda(options, why);
  if (!absl::IsFailedPrecondition(device.status())) return device;
  SetWhy(why, std::string(device.status().message()));
  return OpenSimulated(options);
}

}  // namespace strata

namespace strata {
namespace {

absl::Status NoUnifiedMemory(const DeviceBackend& device) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", device.name(),
      " device backend has no unified memory: use explicit copies"));
}

}  // namespace

uint64_t ManagedMarginBytes(uint64_t total_bytes) {
  return std::max<uint64_t>(256 * kMiB, total_bytes / 32);
}

absl::Status CheckManagedFits(uint64_t asked, const DeviceMemInfo& info,
                              const std::string& device_name) {
  const uint64_t margin = ManagedMarginBytes(info.total_bytes);
  const uint64_t usable =
      info.free_bytes > margin ? info.free_bytes - margin : 0;
  if (asked <= usable) return absl::OkStatus();
  if (usable == 0) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "unified memory: asked for %s of managed memory (the host budget) but "
        "%s has only %s free, not more than the %s it keeps free for the CUDA "
        "context and kernels: free GPU memory, or use --memory=copies",
        FormatByteSize(asked), device_name, FormatByteSize(info.free_bytes),
        FormatByteSize(margin)));
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "unified memory: asked for %s of managed memory (the host budget, which "
      "holds every tensor's pages in this mode) but %s has %s free, less a %s "
      "margin = %s usable: lower --host-budget to at most %s, or use "
      "--memory=copies",
      FormatByteSize(asked), device_name, FormatByteSize(info.free_bytes),
      FormatByteSize(margin), FormatByteSize(usable), FormatByteSize(usable)));
}

absl::StatusOr<std::byte*> DeviceBackend::ReserveManaged(uint64_t /*bytes*/) {
  return NoUnifiedMemory(*this);
}

absl::Status DeviceBackend::PrefetchManaged(
    absl::Span<const ManagedRange> /*ranges*/, MemLocation /*to*/,
    bool /*discard*/, DeviceEvent* /*after*/) {
  return NoUnifiedMemory(*this);
}

absl::Status DeviceBackend::DiscardManaged(
    absl::Span<const ManagedRange> /*ranges*/) {
  return NoUnifiedMemory(*this);
}

absl::Status DeviceBackend::AdviseManaged(const ManagedRange& /*range*/,
                                          ManagedAdvice /*advice*/) {
  return NoUnifiedMemory(*this);
}

absl::Status DeviceBackend::ServeFault(const ManagedRange& /*range*/,
                                       MemLocation /*to*/) {
  return NoUnifiedMemory(*this);
}

}  // namespace strata
