// faulty_block_io.h: FaultyBlockIo, a BlockIo wrapper that injects seeded
// faults (EIO, ENOSPC, short read, short write, bit flip) in front of a real
// engine, so tests can drive the store's error and checksum paths, and holds
// chosen requests at its gate, so tests can force a race.
//
// Policy: the spec is a FaultSpec (fault_spec.h). A request matches when its
// op passes `ops` (kAll, kReads, kWrites; kH2D and kD2H match nothing here)
// and the kind applies to it (short read and bit flip: reads only; short
// write: writes only; kTornCopy: nothing). Requests that are not faulted run
// on the wrapped engine in one batch with the rest. Before anything else, a
// batch with a read in it passes the gate as GateOp::kNvmeRead, one with a
// write as GateOp::kNvmeWrite.
//
// Thread safety: thread-safe; set_spec may be called while Run is running
// (later requests see the new spec).
#ifndef STRATA_TIERS_FAULT_FAULTY_BLOCK_IO_H_
#define STRATA_TIERS_FAULT_FAULTY_BLOCK_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/sync.h"
#include "tiers/fault/fault_spec.h"
#include "tiers/fault/gate.h"
#include "tiers/nvme/block_io.h"

namespace strata {

class FaultyBlockIo final : public BlockIo {
 public:
  // Wraps `inner` (owned). Starts with `spec`.
  FaultyBlockIo(std::unique_ptr<BlockIo> inner, const FaultSpec& spec);
  FaultyBlockIo(const FaultyBlockIo&) = delete;
  FaultyBlockIo& operator=(const FaultyBlockIo&) = delete;

  // "faulty(<inner engine>)".
  std::string_view engine_name() const override { return name_; }
  // Runs the requests that are not faulted on the wrapped engine, then
  // returns the first injected error, else the engine's status. Waits for
  // every request either way.
  absl::Status Run(absl::Span<const IoRequest> requests) override;

  // Replaces the spec and restarts its draw stream and match count (the
  // injected() count carries on).
  void set_spec(const FaultSpec& spec);
  // Faults injected so far.
  uint64_t injected() const;
  // Where tests hold requests in flight.
  Gate& gate() { return gate_; }

  // The code Run returns for a fault of `kind` (OK for kBitFlip, whose
  // request succeeds with a flipped bit; OK for kTornCopy, never injected
  // here).
  static absl::StatusCode InjectedCode(FaultKind kind);

 private:
  struct Plan;
  bool Matches(const IoRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PassGate(absl::Span<const IoRequest> requests);
  Plan PlanFaults(absl::Span<const IoRequest> requests);

  // Constant after construction.
  const std::unique_ptr<BlockIo> inner_;
  const std::string name_;

  Gate gate_;  // thread-safe on its own

  mutable Mutex mu_;
  FaultSpec spec_ ABSL_GUARDED_BY(mu_);
  FaultDraws draws_ ABSL_GUARDED_BY(mu_);
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULTY_BLOCK_IO_H_
