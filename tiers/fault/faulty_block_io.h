// faulty_block_io.h: FaultyBlockIo, a BlockIo wrapper that injects seeded
// faults (EIO, ENOSPC, short read, short write, bit flip) in front of a real
// engine, so tests can drive the store's error and checksum paths. Errors
// are worded and coded as the real engines' (tiers/nvme/io_error.h).
//
// Policy: a request "matches" when its op passes FaultSpec::ops and the fault
// kind applies to it (short read and bit flip: reads only; short write:
// writes only). Each matching request draws one number from a SplitMix64
// stream seeded by FaultSpec::seed and is faulted if the draw falls below
// `rate`, or if it is the `nth` matching one. The same seed and the same
// sequence of requests give the same faults. Requests that are not faulted
// run on the wrapped engine in one batch with the rest.
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
#include "base/sync.h"
#include "tiers/nvme/block_io.h"

namespace strata {

enum class FaultKind : uint8_t {
  kEio,         // the request fails with EIO (Unavailable); nothing moves
  kEnospc,      // the request fails with ENOSPC (ResourceExhausted, disk full)
  kShortRead,   // half the bytes are read, then DataLoss "short read"
  kShortWrite,  // half the bytes are written, then EIO (Unavailable)
  kBitFlip,     // the read succeeds with one bit flipped; returns OK
};

// Which requests faults may hit.
enum class FaultOps : uint8_t { kReads, kWrites, kBoth };

struct FaultSpec {
  // Seeds the draw stream. Default: 1.
  uint64_t seed = 1;
  // Probability that a matching request is faulted, 0..1. Default: 0.
  double rate = 0.0;
  // Fault exactly the nth matching request (1-based) as well; 0: off.
  // Default: 0.
  uint64_t nth = 0;
  // Default: kBoth.
  FaultOps ops = FaultOps::kBoth;
  // Default: kEio.
  FaultKind kind = FaultKind::kEio;
};

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

 private:
  struct Plan;
  bool Matches(const IoRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t NextDraw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Plan PlanFaults(absl::Span<const IoRequest> requests);

  // Constant after construction.
  const std::unique_ptr<BlockIo> inner_;
  const std::string name_;

  mutable Mutex mu_;
  FaultSpec spec_ ABSL_GUARDED_BY(mu_);
  uint64_t rng_state_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t matched_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULTY_BLOCK_IO_H_
