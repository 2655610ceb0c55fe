// faulty_device.h: FaultyDevice, a DeviceBackend that wraps another one and
// makes chosen Copy calls fail, to test that a failed transfer never costs
// data.
//
// Policy: every call is forwarded to the wrapped backend. A Copy of a kind the
// CopyFaultSpec covers is "eligible"; the fail_nth-th eligible copy fails, and
// each eligible copy also fails with probability `rate` (seeded, so a run is
// reproducible for a given order of calls). A failing copy first copies the
// first half of its bytes when `copy_prefix` is set, so the destination holds
// a mix of old and new data (callers must not trust it), then returns
// Internal("injected copy fault ..."). The source is never touched.
// Unified-memory prefetches (to the device: H2D; to the host: D2H) and
// faults (by direction) are eligible too; a failing one moves nothing (managed
// memory stays coherent, so there is nothing to tear).
//
// Thread safety: every method may be called concurrently, set_spec included.
#ifndef STRATA_TIERS_FAULT_FAULTY_DEVICE_H_
#define STRATA_TIERS_FAULT_FAULTY_DEVICE_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "tiers/device/device_backend.h"

namespace strata {

struct CopyFaultSpec {
  // Seed of the random stream behind `rate`. Default: 0.
  uint64_t seed = 0;
  // Probability that an eligible copy fails, in [0, 1]. Default: 0.
  double rate = 0;
  // The eligible copy (1-based, counted from the last set_spec) that fails;
  // 0 disables. Default: 0.
  uint64_t fail_nth = 0;
  // Which copy kinds are eligible. Default: both.
  bool h2d = true;
  bool d2h = true;
  // A failing copy first copies the first half of its bytes. Default: true.
  bool copy_prefix = true;
};

class FaultyDevice : public DeviceBackend {
 public:
  // Takes ownership of `inner` (non-null).
  explicit FaultyDevice(std::unique_ptr<DeviceBackend> inner,
                        const CopyFaultSpec& spec = {});
  FaultyDevice(const FaultyDevice&) = delete;
  FaultyDevice& operator=(const FaultyDevice&) = delete;

  // Replaces the spec and restarts the eligible-copy count and the random
  // stream.
  void set_spec(const CopyFaultSpec& spec);
  // Copies failed on purpose so far.
  uint64_t injected() const;
  DeviceBackend& inner() { return *inner_; }

  // The wrapped backend's name and kind: reports stay truthful.
  std::string name() const override { return inner_->name(); }
  bool is_simulated() const override { return inner_->is_simulated(); }

  absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) override;
  absl::Status Copy(CopyKind kind, void* dst, const void* src, uint64_t bytes,
                    DeviceEvent* after = nullptr) override;
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
  absl::Status ServeFault(const ManagedRange& range, MemLocation to) override;
  bool batched_prefetch() const override { return inner_->batched_prefetch(); }

 private:
  // Internal("injected copy fault ...") if this hint (toward `to`) is the
  // one to fail, else OK.
  absl::Status MaybeFailHint(MemLocation to, std::string_view what);
  // Whether this copy fails; if so, its ordinal among eligible copies.
  bool ShouldFail(CopyKind kind, uint64_t* ordinal, bool* copy_prefix);

  const std::unique_ptr<DeviceBackend> inner_;

  mutable Mutex mu_;
  CopyFaultSpec spec_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  uint64_t eligible_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULTY_DEVICE_H_
