// simulated_device.h: SimulatedDevice, the device backend used when no GPU is
// present (tests, planning, CPU-only machines).
//
// Policy: device memory is one page-aligned host mapping of at most the device
// budget, made by ReserveArena (called once). Each direction (H2D, D2H) has
// its own copy engine thread; a Copy() enqueues a job and blocks until the
// engine has served it. The engine serves queued jobs one chunk
// (DeviceOptions::copy_chunk_bytes) at a time, round robin, so a small copy is
// never stuck behind a large one. With DeviceOptions::sim_link_gbps > 0 each
// chunk occupies the link for at least bytes / (gbps * 1e9) seconds and each
// copy additionally waits sim_latency_seconds once, so transfers take real
// time and overlap can be measured. Without a link model there is no link to
// share, so copies run as a memcpy on the calling thread (no engine handoff
// to inflate the cost of small copies). Kernels are CPU code that has already
// run, so events are complete at once.
//
// Unified memory: ReserveManaged maps one more host region; prefetch hints
// move no bytes (host and "device" are the same memory) but occupy the link
// for the bytes they migrate (H2D engine to the device, D2H engine to the
// host), as does a fault (ServeFault); a discarding prefetch and advice cost
// nothing. The reported GPU memory is DeviceOptions::sim_memory_bytes, or
// this machine's physical memory.
//
// Thread safety: every method may be called concurrently.
#ifndef STRATA_TIERS_DEVICE_SIMULATED_DEVICE_H_
#define STRATA_TIERS_DEVICE_SIMULATED_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/sync.h"
#include "strata/options.h"
#include "tiers/device/device_backend.h"

namespace strata {

class SimCopyEngine;  // defined in simulated_device.cc

class SimulatedDevice : public DeviceBackend {
 public:
  // Starts the two copy engines, timing the link model on `clock` (not
  // owned, outlives the device; null: the real clock). InvalidArgument on a
  // zero chunk size or a negative link model parameter.
  static absl::StatusOr<std::unique_ptr<SimulatedDevice>> Create(
      const DeviceOptions& options, Clock* clock = nullptr);
  ~SimulatedDevice() override;  // joins the engines, unmaps the arena
  SimulatedDevice(const SimulatedDevice&) = delete;
  SimulatedDevice& operator=(const SimulatedDevice&) = delete;

  std::string name() const override { return "simulated"; }
  bool is_simulated() const override { return true; }

  // Maps `bytes` (> 0, at most the budget) of zeroed host memory.
  // FailedPrecondition on a second call; ResourceExhausted above the budget.
  absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) override;

  // InvalidArgument when the device side of the copy lies outside the
  // reserved arena or a pointer is null.
  absl::Status Copy(CopyKind kind, void* dst, const void* src, uint64_t bytes,
                    DeviceEvent* after = nullptr) override;

  absl::StatusOr<std::shared_ptr<DeviceEvent>> RecordEvent(
      void* stream) override;
  absl::Status StreamWait(void* stream, DeviceEvent& event) override;
  absl::Status RegisterHost(void* ptr, uint64_t bytes) override;
  absl::Status UnregisterHost(void* ptr, uint64_t bytes) override;
  absl::StatusOr<DeviceMemInfo> GetMemInfo() override;

  // InvalidArgument for a range outside the managed region.
  absl::StatusOr<std::byte*> ReserveManaged(uint64_t bytes) override;
  absl::Status PrefetchManaged(absl::Span<const ManagedRange> ranges,
                               MemLocation to, bool discard,
                               DeviceEvent* after = nullptr) override;
  absl::Status DiscardManaged(absl::Span<const ManagedRange> ranges) override;
  absl::Status AdviseManaged(const ManagedRange& range,
                             ManagedAdvice advice) override;
  absl::Status ServeFault(const ManagedRange& range, MemLocation to) override;
  bool batched_prefetch() const override { return true; }

 private:
  SimulatedDevice(const DeviceOptions& options, Clock* clock);
  absl::Status CheckDeviceRange(const void* ptr, uint64_t bytes) const;
  absl::Status CheckManagedRange(const ManagedRange& range) const;
  // Occupies the link toward `to` for `bytes` (no bytes move).
  absl::Status OccupyLink(MemLocation to, const ManagedRange& range);

  // Constant after construction.
  static absl::Status Memcpy(void* dst, const void* src, uint64_t bytes);

  const DeviceOptions options_;
  std::unique_ptr<SimCopyEngine> h2d_;
  std::unique_ptr<SimCopyEngine> d2h_;

  mutable Mutex mu_;
  std::byte* arena_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::byte* managed_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t managed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_TIERS_DEVICE_SIMULATED_DEVICE_H_
