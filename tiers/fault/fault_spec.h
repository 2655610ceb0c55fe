// fault_spec.h: FaultSpec, the one description of what the fault-injecting
// wrappers (FaultyBlockIo in front of block I/O, FaultyDevice in front of a
// device backend) inject, and FaultDraws, the seeded stream that picks the
// operations that fail.
//
// Policy: an operation "matches" when `ops` covers it and `kind` applies to
// it; each wrapper's header says which operations and kinds it sees (a kind
// a wrapper does not apply matches none of its operations). Each matching
// operation draws one number from a SplitMix64 stream seeded by `seed` and
// fails if the draw falls below `rate`, if it is the `nth` matching one
// since the spec was set, or if it is the `from`th or any later one (a
// persistent fault: a disk that has died). The same seed and the same
// sequence of operations give the same faults.
#ifndef STRATA_TIERS_FAULT_FAULT_SPEC_H_
#define STRATA_TIERS_FAULT_FAULT_SPEC_H_

#include <cstdint>

namespace strata {

// What an injected fault does, and the status it returns (the codes are
// each wrapper's InjectedCode()).
enum class FaultKind : uint8_t {
  // Block I/O: fails with EIO, nothing moves (the EIO status of
  // tiers/nvme/io_error.h). Device: the copy or hint fails with Internal,
  // nothing moves.
  kEio,
  // Block I/O: fails with ENOSPC, nothing moves (ResourceExhausted, naming
  // a full disk).
  kEnospc,
  // Block I/O reads: half the bytes are read, then Unavailable "short read"
  // (transient, as an engine that gave up resubmitting would say; nothing is
  // known to be corrupt).
  kShortRead,
  // Block I/O writes: half the bytes are written, then EIO (as kEio).
  kShortWrite,
  // Block I/O reads: succeed with one bit flipped (returns OK; the store's
  // checksum turns it into DataLoss).
  kBitFlip,
  // Device copies: the first half of the bytes is copied, then Internal
  // (the destination is torn); a hint fails as for kEio.
  kTornCopy,
};

// Which operations faults may hit.
enum class FaultOps : uint8_t {
  kAll,     // every operation the wrapper injects into
  kReads,   // block I/O reads
  kWrites,  // block I/O writes
  kH2D,     // device: copies, prefetches and page faults toward the device
  kD2H,     // device: copies, prefetches and page faults toward the host
  // Device: device-to-device copies (compaction moving a copy within the
  // device tier); no other op matches them.
  kD2D,
};

struct FaultSpec {
  // Seeds the draw stream. Default: 1.
  uint64_t seed = 1;
  // Probability that a matching operation fails, 0..1. Default: 0.
  double rate = 0.0;
  // The nth matching operation (1-based, counted from set_spec) fails as
  // well; 0: off. Default: 0.
  uint64_t nth = 0;
  // Every matching operation from the `from`th on (1-based, counted from
  // set_spec) fails: a fault that lasts, which no retry gets past; 0: off.
  // Default: 0.
  uint64_t from = 0;
  // Default: kAll.
  FaultOps ops = FaultOps::kAll;
  // Default: kEio.
  FaultKind kind = FaultKind::kEio;
};

// The draw stream of one spec. Not thread-safe: the wrappers hold a lock.
class FaultDraws {
 public:
  // Restarts the stream and the match count for `spec`.
  void Reset(const FaultSpec& spec);
  // Counts one matching operation and says whether it fails: one draw
  // against `rate` (drawn for every match, so the stream does not depend
  // on `nth` or `from`), or it is the `nth`, or the `from`th or later.
  bool NextFails(const FaultSpec& spec);
  // The next raw 64-bit draw (e.g. where a bit flip lands).
  uint64_t Next();
  // Matching operations counted since Reset.
  uint64_t matched() const { return matched_; }

 private:
  uint64_t state_ = 1;
  uint64_t matched_ = 0;
};

}  // namespace strata

#endif  // STRATA_TIERS_FAULT_FAULT_SPEC_H_
