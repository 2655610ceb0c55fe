// faulty_device.h: FaultyDevice, a DeviceBackend that wraps another one and
// makes chosen transfers fail, to test that a failed transfer never costs
// data, and holds chosen ones at its gate, so tests can force a race.
//
// Policy: every call is forwarded to the wrapped backend. The spec is a
// FaultSpec (fault_spec.h). A Copy matches when its direction passes `ops`
// (kAll, kH2D, kD2H; kD2D alone matches device-to-device copies, which do
// not cross the link; kReads and kWrites match nothing here) and the kind is
// kEio or kTornCopy (the block-I/O kinds match nothing). A failing copy with
// kTornCopy first copies the first half of its bytes, so the destination
// holds a mix of old and new data (callers must not trust it); either way it
// returns Internal("injected copy fault ..."). The source is never touched.
// Unified-memory prefetches (to the device: kH2D; to the host: kD2H) and
// page faults (by direction) match the same way; a failing one moves nothing
// (managed memory stays coherent, so there is nothing to tear).
// Before anything else, each Copy, PrefetchManaged, DiscardManaged and
// ServeFault passes the gate as its GateOp (gate.h). Events it records wrap
// the wrapped backend's: their Synchronize passes the gate as kEventWait,
// and while kEventWait is armed they are not Done(), as if kernels on the
// recording stream were still running. CopyAsync's events are gated the
// same way: a copy still on its stream.
//
// Thread safety: every method may be called concurrently, set_spec included.
#ifndef STRATA_TIERS_FAULT_FAULTY_DEVICE_H_
#define STRATA_TIERS_FAULT_FAULTY_DEVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "tiers/device/device_backend.h"
#include "tiers/fault/fault_spec.h"
#include "tiers/fault/gate.h"

namespace strata {

class FaultyDevice : public DeviceBackend {
 public:
  // Takes ownership of `inner` (non-null).
  explicit FaultyDevice(std::unique_ptr<DeviceBackend> inner,
                        const FaultSpec& spec = {});
  FaultyDevice(const FaultyDevice&) = delete;
  FaultyDevice& operator=(const FaultyDevice&) = delete;

  // Replaces the spec and restarts the match count and the draw stream.
  void set_spec(const FaultSpec& spec);
  // Transfers failed on purpose so far.
  uint64_t injected() const;
  // Where tests hold transfers in flight.
  Gate& gate() { return gate_; }
  // The code an injected fault returns, whatever its kind.
  static constexpr absl::StatusCode InjectedCode() {
    return absl::StatusCode::kInternal;
  }
  DeviceBackend& inner() { return *inner_; }

  // The wrapped backend's name and kind: reports stay truthful.
  std::string name() const override { return inner_->name(); }
  bool is_simulated() const override { return inner_->is_simulated(); }

  absl::StatusOr<std::byte*> ReserveArena(uint64_t bytes) override;
  absl::Status Copy(CopyKind kind, void* dst, const void* src, uint64_t bytes,
                    DeviceEvent* after = nullptr) override;
  // Passes the gate and draws a fault as Copy does. Not failing: the wrapped
  // backend's CopyAsync, its event gated as RecordEvent's are. Failing: its
  // error at once, or with set_late_copy_faults(true) an event (gated the
  // same way) whose Synchronize returns it, a copy that failed after it was
  // queued (a torn one copied half its bytes first).
  absl::StatusOr<std::shared_ptr<DeviceEvent>> CopyAsync(
      CopyKind kind, void* dst, const void* src, uint64_t bytes,
      DeviceEvent* after = nullptr) override;
  // Whether CopyAsync's injected faults surface at the event (see above).
  void set_late_copy_faults(bool late);
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
  class GatedEvent;
  // The wrapped backend's event behind one this wrapper recorded (or
  // `event` itself; null stays null).
  static DeviceEvent* Inner(DeviceEvent* event);
  // Internal("injected copy fault ...") if this hint (toward `to`) is the
  // one to fail, else OK.
  absl::Status MaybeFailHint(MemLocation to, std::string_view what);
  // Passes the gate for a copy and draws its fault: the injected error
  // (after copying half the bytes of a torn one), or nullopt to copy.
  std::optional<absl::Status> CopyFault(CopyKind kind, void* dst,
                                        const void* src, uint64_t bytes,
                                        DeviceEvent* after);
  // Whether a transfer toward the device (kH2D) or the host (kD2H) fails;
  // if so, its ordinal among matching transfers and whether it tears.
  bool ShouldFail(CopyKind kind, uint64_t* ordinal, bool* torn);

  // Constant after construction.
  const std::unique_ptr<DeviceBackend> inner_;

  Gate gate_;  // thread-safe on its own

  mutable Mutex mu_;
  FaultSpec spec_ ABSL_GUARDED_BY(mu_);
  FaultDraws draws_ ABSL_GUARDED_BY(mu_);
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
  bool late_copy_faults_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULTY_DEVICE_H_
