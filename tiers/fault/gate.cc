// gate.cc: Gate, holding a wrapper's operations in flight for a test
// (policy in gate.h).
#include "tiers/fault/gate.h"

#include "absl/time/clock.h"

namespace strata {

const char* GateOpName(GateOp op) {
  switch (op) {
    case GateOp::kNvmeRead:
      return "nvme read";
    case GateOp::kNvmeWrite:
      return "nvme write";
    case GateOp::kH2D:
      return "H2D copy";
    case GateOp::kD2H:
      return "D2H copy";
    case GateOp::kPrefetchToDevice:
      return "prefetch to device";
    case GateOp::kPrefetchToHost:
      return "prefetch to host";
    case GateOp::kDiscard:
      return "discard";
    case GateOp::kFaultToDevice:
      return "page fault to device";
    case GateOp::kFaultToHost:
      return "page fault to host";
    case GateOp::kEventWait:
      return "event wait";
  }
  return "?";
}

void Gate::Arm(GateOp op, int count) {
  MutexLock lock(&mu_);
  at(op).armed += count;
}

bool Gate::WaitUntilHeld(GateOp op, int count, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (at(op).parked < count) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    changed_.WaitWithTimeout(&mu_, left);
  }
  return true;
}

void Gate::Release(GateOp op) {
  MutexLock lock(&mu_);
  Point& p = at(op);
  p.armed = 0;
  ++p.releases;
  changed_.SignalAll();
}

void Gate::ReleaseAll() {
  for (int i = 0; i < kNumGateOps; ++i) Release(static_cast<GateOp>(i));
}

uint64_t Gate::held(GateOp op) const {
  MutexLock lock(&mu_);
  return at(op).held;
}

int Gate::parked(GateOp op) const {
  MutexLock lock(&mu_);
  return at(op).parked;
}

bool Gate::armed(GateOp op) const {
  MutexLock lock(&mu_);
  return at(op).armed > 0;
}

void Gate::Pass(GateOp op) {
  MutexLock lock(&mu_);
  Point& p = at(op);
  if (p.armed == 0) return;
  --p.armed;
  ++p.parked;
  ++p.held;
  const uint64_t release = p.releases;
  changed_.SignalAll();
  while (p.releases == release) changed_.Wait(&mu_);
  --p.parked;
  changed_.SignalAll();
}

}  // namespace strata
