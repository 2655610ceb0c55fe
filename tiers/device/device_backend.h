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
#include "absl/types/span.h"
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
  // Whether the event has happened, without blocking (cudaEventQuery). An
  // event whose work failed counts as happened (Synchronize says how).
  // Default: false, so a caller that must know synchronizes.
  virtual bool Done() { return false; }
};

struct DeviceMemInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// Unified memory: where managed pages should be.
enum class MemLocation : uint8_t { kDevice, kHost };

// A range of managed memory (from ReserveManaged).
struct ManagedRange {
  std::byte* ptr = nullptr;
  uint64_t bytes = 0;
};

enum class ManagedAdvice : uint8_t {
  // cudaMemAdviseSetPreferredLocation(host) + cudaMemAdviseSetAccessedBy
  // (device): pages live on the host unless prefetched, and a device access
  // to a page still there is served over the link instead of migrating it
  // back and forth (thrashing).
  kPreferHostAccessedByDevice,
  // cudaMemAdviseSetReadMostly / UnsetReadMostly: a prefetch to the device
  // makes a read-only duplicate; the host copy stays valid.
  kReadMostly,
  kUnsetReadMostly,
};

// Managed memory a store leaves free on the GPU: max(256 MiB, total / 32),
// room for the CUDA context, cuBLAS workspaces and the user's own kernels.
uint64_t ManagedMarginBytes(uint64_t total_bytes);

// ResourceExhausted unless `asked` bytes of managed memory fit in `info`'s
// free memory less ManagedMarginBytes; the message states what was asked,
// what is free and the largest host budget that would fit.
absl::Status CheckManagedFits(uint64_t asked, const DeviceMemInfo& info,
                              const std::string& device_name);

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

  // Copy, stream-ordered: queues the copy on its engine's stream (after
  // `after`, when set) and returns at once with an event that happens once
  // the bytes are there; the CPU does not wait. Until then the source must
  // stay unchanged and the destination unread except by work ordered after
  // the event (StreamWait). A copy that cannot be queued returns its error
  // (the destination undefined, the source untouched); one that fails later
  // reports it from the event's Synchronize. Default (the simulated device,
  // whose copies are CPU work): Copy, then an event that has happened.
  virtual absl::StatusOr<std::shared_ptr<DeviceEvent>> CopyAsync(
      CopyKind kind, void* dst, const void* src, uint64_t bytes,
      DeviceEvent* after = nullptr);

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

  // --- Unified memory (DeviceOptions::memory == kUnified). The defaults
  // return Unimplemented.

  // Allocates `bytes` (> 0) of managed memory (cudaMallocManaged), once; it
  // is freed with the backend. ResourceExhausted (CheckManagedFits) when it
  // would exceed the GPU's free memory less the margin; FailedPrecondition on
  // a GPU without concurrent managed access (the CPU could not use it while
  // kernels run).
  virtual absl::StatusOr<std::byte*> ReserveManaged(uint64_t bytes);
  // Migrates `ranges` to `to` and returns when they are there (completion
  // tracked by an event recorded after the prefetch: the range attribute
  // reports what was asked, not what finished). `discard`: the contents are
  // dead, so no stale byte crosses the link
  // (cudaMemDiscardAndPrefetchBatchAsync). Several ranges, or a discard, go
  // in one batch call where batched_prefetch(); otherwise one plain call per
  // range (a discard is then a plain prefetch). `after`: the migration
  // starts after this event (kernels still reading). Internal on a
  // CUDA error; the pages are then wherever the driver left them, with their
  // contents intact (managed memory stays coherent).
  virtual absl::Status PrefetchManaged(absl::Span<const ManagedRange> ranges,
                                       MemLocation to, bool discard,
                                       DeviceEvent* after = nullptr);
  // Marks the contents of `ranges` dead (cudaMemDiscardBatchAsync) and
  // returns once that is done, so later writes to them are kept: later
  // migrations move no bytes for them. Without batch support, a no-op.
  virtual absl::Status DiscardManaged(absl::Span<const ManagedRange> ranges);
  virtual absl::Status AdviseManaged(const ManagedRange& range,
                                     ManagedAdvice advice);
  // An access from `to` (the device's kernels, or the CPU) to `range` while
  // its pages are on the other side, with no prefetch: on a GPU nothing to do
  // (page faults serve it); the simulated device charges the link time a
  // fault-driven migration takes.
  virtual absl::Status ServeFault(const ManagedRange& range, MemLocation to);
  // Whether PrefetchManaged/DiscardManaged use the batch calls (every GPU
  // reports cudaDevAttrConcurrentManagedAccess).
  virtual bool batched_prefetch() const { return false; }
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
