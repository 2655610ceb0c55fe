// cuda_device.h: CudaDevice, the device backend for a real NVIDIA GPU, and
// ProbeCudaDevice, which says whether one answers.
//
// Built only when the CUDA toolkit is found (STRATA_HAVE_CUDA); include it
// only under #ifdef STRATA_HAVE_CUDA. The header names no CUDA type, so code
// without the CUDA include path may include it.
//
// Policy: the device tier is one cudaMalloc made by ReserveArena (called
// once), refused up front when it exceeds the GPU's free memory. Copies run
// on two non-blocking streams, one per direction, so both copy engines work.
// A Copy is issued in DeviceOptions::copy_chunk_bytes chunks with at most two
// of its chunks in flight (a ring of two events from a pool), so copies from
// other threads on the same stream interleave with it; each call waits only
// for its own events. Every CUDA error becomes Internal with the failing
// call, the error name and its description. Each method sets the calling
// thread's current device first, since store threads differ.
//
// Unified memory: one cudaMallocManaged (ReserveManaged), refused above the
// free memory less ManagedMarginBytes. Prefetches run on the copy stream of
// their direction and are waited for with an event recorded after them;
// several ranges go in one cudaMemPrefetchBatchAsync (or
// cudaMemDiscardAndPrefetchBatchAsync) when every GPU reports concurrent
// managed access, one cudaMemPrefetchAsync each otherwise.
//
// Files: cuda_device.cc (opening the device, the arena, copies, events, host
// registration) and cuda_managed.cc (unified memory).
//
// Thread safety: every method may be called concurrently.
#ifndef STRATA_TIERS_DEVICE_CUDA_DEVICE_H_
#define STRATA_TIERS_DEVICE_CUDA_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "strata/options.h"
#include "tiers/device/device_backend.h"

// The CUDA runtime's handle types (cudaStream_t, cudaEvent_t) point to these.
struct CUstream_st;
struct CUevent_st;

namespace strata {

// Describes CUDA device `ordinal` ("NVIDIA H200, 140 GiB, compute 9.0").
// FailedPrecondition when it does not answer, with the reason ("no CUDA
// device (cudaErrorInsufficientDriver: ...)").
absl::StatusOr<std::string> ProbeCudaDevice(int ordinal);

class CudaDevice : public DeviceBackend {
 public:
  // Selects options.cuda_device and creates the copy streams.
  // FailedPrecondition when that device does not answer; Internal on a CUDA
  // error.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(
      const DeviceOptions& options);
  // Waits for the copy streams, then frees the arena, streams and events.
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return "cuda:" + device_name_; }
  bool is_simulated() const override { return false; }

  // One cudaMalloc of `bytes` (> 0). FailedPrecondition on a second call;
  // ResourceExhausted when `bytes` exceeds the free device memory.
  absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) override;
  // `after` must come from this backend's RecordEvent (InvalidArgument if
  // not).
  absl::Status Copy(CopyKind kind, void* dst, const void* src, uint64_t bytes,
                    DeviceEvent* after = nullptr) override;
  // The whole copy queued on its engine's stream (in copy_chunk_bytes
  // chunks, none waited for), then an event recorded behind it.
  absl::StatusOr<std::shared_ptr<DeviceEvent>> CopyAsync(
      CopyKind kind, void* dst, const void* src, uint64_t bytes,
      DeviceEvent* after = nullptr) override;
  // CUDA events around `repeats` whole-buffer copies on the copy stream.
  absl::StatusOr<double> TimeCopies(CopyKind kind, void* dst, const void* src,
                                    uint64_t bytes, uint64_t repeats) override;
  absl::StatusOr<std::shared_ptr<DeviceEvent>> RecordEvent(
      void* stream) override;
  absl::Status StreamWait(void* stream, DeviceEvent& event) override;
  absl::Status RegisterHost(void* ptr, uint64_t bytes) override;
  absl::Status UnregisterHost(void* ptr, uint64_t bytes) override;
  absl::StatusOr<DeviceMemInfo> GetMemInfo() override;

  absl::StatusOr<std::byte*> ReserveManaged(uint64_t bytes) override;
  absl::Status PrefetchManaged(absl::Span<const ManagedRange> ranges,
                               MemLocation to, bool discard,
                               DeviceEvent* after = nullptr) override;
  absl::Status DiscardManaged(absl::Span<const ManagedRange> ranges) override;
  absl::Status AdviseManaged(const ManagedRange& range,
                             ManagedAdvice advice) override;
  // Nothing: the kernel's page faults migrate the pages.
  absl::Status ServeFault(const ManagedRange& range, MemLocation to) override;
  bool batched_prefetch() const override { return batched_; }

 private:
  CudaDevice(const DeviceOptions& options, std::string device_name);
  absl::Status Init();
  absl::Status SetDevice() const;
  // Issues the chunks of one copy on `stream`, two in flight at most, and
  // waits for them. `events` holds two pooled events.
  absl::Status CopyChunks(CopyKind kind, CUstream_st* stream, std::byte* dst,
                          const std::byte* src, uint64_t bytes,
                          CUevent_st* const events[2]);
  absl::StatusOr<CUevent_st*> TakeEvent();
  void ReturnEvent(CUevent_st* event);
  // Makes later work on `stream` wait for `after` (none when null);
  // InvalidArgument when `after` is not this backend's.
  absl::Status StreamAfter(CUstream_st* stream, DeviceEvent* after);
  // Records a pooled event on `stream` and waits for it: for all the work
  // issued there so far.
  absl::Status WaitForStream(CUstream_st* stream);

  // Constant after construction (streams after Init).
  const DeviceOptions options_;
  const std::string device_name_;
  CUstream_st* h2d_stream_ = nullptr;
  CUstream_st* d2h_stream_ = nullptr;
  bool batched_ = false;  // every GPU has concurrent managed access

  Mutex mu_;
  void* arena_ ABSL_GUARDED_BY(mu_) = nullptr;
  void* managed_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<CUevent_st*> free_events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_TIERS_DEVICE_CUDA_DEVICE_H_
