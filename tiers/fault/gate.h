// gate.h: Gate, the point in a fault wrapper (FaultyBlockIo, FaultyDevice)
// where a test holds an operation in flight, to force a race — an eviction
// against a fetch, a reader against a discard — instead of hoping a sleep
// orders it (RocksDB's sync points, at the seams).
//
// Use:
//   gate.Arm(GateOp::kNvmeRead);          // hold the next NVMe read
//   ... start the fetch (a prefetch, an acquire on another thread) ...
//   ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead));  // it is in flight
//   ... run the other side of the race, check what it sees ...
//   gate.Release(GateOp::kNvmeRead);      // the fetch goes on
//   EXPECT_EQ(gate.held(GateOp::kNvmeRead), 1u);  // the race happened
//
// Policy: a wrapper calls Pass(op) when an operation reaches it, before it
// decides on a fault or calls the wrapped layer. Arm(op) makes the next
// operation of `op` to pass park there (Arm twice: the next two); a parked
// operation stays parked until Release(op), which lets every parked
// operation of `op` go and disarms `op`. Operations of ops not armed pass
// straight through. Nothing here sleeps or reads a clock except
// WaitUntilHeld's timeout, which only bounds how long a broken test hangs.
// Release everything (ReleaseAll) before destroying what the parked threads
// belong to.
//
// Thread safety: thread-safe.
#ifndef STRATA_TIERS_FAULT_GATE_H_
#define STRATA_TIERS_FAULT_GATE_H_

#include <array>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace strata {

// The operations a gate can hold, by the wrapper that passes them.
enum class GateOp : uint8_t {
  kNvmeRead,          // FaultyBlockIo: a batch with a read in it
  kNvmeWrite,         // FaultyBlockIo: a batch with a write in it
  kH2D,               // FaultyDevice::Copy, host to device
  kD2H,               // FaultyDevice::Copy, device to host
  kPrefetchToDevice,  // FaultyDevice::PrefetchManaged toward the device
  kPrefetchToHost,    // FaultyDevice::PrefetchManaged toward the host
  kDiscard,           // FaultyDevice::DiscardManaged
  kFaultToDevice,     // FaultyDevice::ServeFault toward the device
  kFaultToHost,       // FaultyDevice::ServeFault toward the host
  // FaultyDevice: a CPU wait for a recorded event (DeviceEvent::Synchronize);
  // while armed, the events it records report not Done(): kernels still
  // running on the caller's stream.
  kEventWait,
};
inline constexpr int kNumGateOps = 10;

// "nvme read", "H2D copy", ...
const char* GateOpName(GateOp op);

class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Holds the next `count` operations of `op` that pass (in addition to
  // any still armed).
  void Arm(GateOp op, int count = 1);
  // Blocks until `count` operations of `op` are parked here at once. False
  // if they were not within `timeout` (they never came: the test is wrong).
  bool WaitUntilHeld(GateOp op, int count = 1,
                     absl::Duration timeout = absl::Seconds(60));
  // Lets every parked operation of `op` go on, and disarms `op`.
  void Release(GateOp op);
  // Release() for every op.
  void ReleaseAll();

  // Operations of `op` held so far (parked, whether released since or not).
  uint64_t held(GateOp op) const;
  // Operations of `op` parked now.
  int parked(GateOp op) const;
  // Whether the next operation of `op` would be held.
  bool armed(GateOp op) const;

  // For wrappers: called as an operation of `op` starts; parks the calling
  // thread while `op` is armed, until Release(op).
  void Pass(GateOp op);

 private:
  struct Point {
    int armed = 0;          // operations still to hold
    int parked = 0;         // operations parked now
    uint64_t held = 0;      // operations ever held
    uint64_t releases = 0;  // Release() calls, so parked ones see theirs
  };
  Point& at(GateOp op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return points_[static_cast<int>(op)];
  }
  const Point& at(GateOp op) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return points_[static_cast<int>(op)];
  }

  mutable Mutex mu_;
  CondVar changed_;  // signalled on every park and release
  std::array<Point, kNumGateOps> points_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_GATE_H_
