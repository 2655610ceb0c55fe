// device_backend.h: the seam in front of all GPU access.
//
// A DeviceBackend owns the device tier's memory (one reservation made at open)
// and the copy engines. The store talks to a GPU only through this interface,
// so store and scheduler tests run unchanged on SimulatedDevice, and a
// fault-injecting wrapper (tiers/fault/) fits in front of any backend.
//
// Thread safety: every method may be called concurrently.
#ifndef STRATA_TIERS_DEVICE_DEVICE_BACKEND_H_
#define STRATA_TIERS_DEVICE_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

// kD2D copies within device memory (on the H2D engine's stream).
enum class CopyKind : uint8_t { kH2D, kD2H, kD2D };

// A point in a stream's work (cudaEvent_t on a GPU). Complete at once on the
// simulated device, whose "kernels" are CPU code that has already finished.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Blocks the calling thread until the event has happened.
  virtual absl::Status Synchronize() = 0;
};

struct DeviceMemInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // "cuda:<device name>" or "simulated".
  virtual std::string name() const = 0;
  virtual bool is_simulated() const = 0;

  // Reserves the device tier: `bytes` of device memory, 256-byte aligned,
  // owned by the backend and freed with it. Called once. ResourceExhausted
  // when the device lacks the memory (the message states free and asked).
  virtual absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) = 0;

  // Copies `bytes` between host and device memory and returns when the copy
  // is complete. H2D/D2H each have their own copy engine (stream/thread); a
  // copy is split into DeviceOptions::copy_chunk_bytes chunks so concurrent
  // copies interleave. If `after` is set, the copy starts only after that
  // event (stream-ordered: the copy stream waits on it, the CPU does not).
  // Internal on a CUDA error; the destination is then undefined and the
  // source untouched.
  virtual absl::Status Copy(CopyKind kind, void* dst, const void* src,
                            uint64_t bytes, DeviceEvent* after = nullptr) = 0;

  // Seconds `repeats` back-to-back copies of `bytes` take, for bandwidth
  // benchmarks. On a GPU: whole-buffer cudaMemcpyAsync calls on the copy
  // stream timed with CUDA events (the nvbandwidth method); the default
  // (simulated device): wall time around Copy. The copies are real.
  virtual absl::StatusOr<double> TimeCopies(CopyKind kind, void* dst,
                                            const void* src, uint64_t bytes,
                                            uint64_t repeats);
  // Records an event on `stream` (cudaStream_t; null = legacy default stream).
  virtual absl::StatusOr<std::shared_ptr<DeviceEvent>> RecordEvent(
      void* stream) = 0;
  // Makes `stream` wait for `event` without blocking the CPU.
  virtual absl::Status StreamWait(void* stream, DeviceEvent& event) = 0;

  // Page-locks host memory for fast DMA (cudaHostRegister). No-op on the
  // simulated device. `bytes` may be any size; the backend registers in chunks
  // of at most 1 GiB.
  virtual absl::Status RegisterHost(void* ptr, uint64_t bytes) = 0;
  virtual absl::Status UnregisterHost(void* ptr, uint64_t bytes) = 0;

  virtual absl::StatusOr<DeviceMemInfo> GetMemInfo() = 0;
};

// Opens the backend `options.backend` asks for; STRATA_DEVICE=cuda|simulated|
// auto overrides it (another value: InvalidArgument). With kAuto, a CUDA
// backend when a GPU answers, else the simulated device; kCuda without a GPU
// is FailedPrecondition. `*why` (if non-null) says which was chosen and why
// ("no CUDA device (cudaErrorInsufficientDriver: ...)", "no CUDA device
// (strata was built without CUDA)", "NVIDIA H200, 140 GiB, compute 9.0").
absl::StatusOr<std::unique_ptr<DeviceBackend>> OpenDeviceBackend(
    const DeviceOptions& options, std::string* why = nullptr);

}  // namespace strata

#endif  // STRATA_TIERS_DEVICE_DEVICE_BACKEND_H_
