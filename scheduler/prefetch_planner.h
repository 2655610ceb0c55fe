// prefetch_planner.h: the prefetch planner — which copies to load ahead of
// the predicted accesses, in which order.
//
// Policy: prefetch in trace order within a byte lookahead per tier. The walk
// over the upcoming accesses charges every predicted access on a tier its
// tensor's size (rounded to the tier's allocation granule; copies already
// there and repeated accesses count too) against that tier's lookahead, and
// stops planning a tier at the first access that would pass it, so nearer
// accesses are always served first and the window never asks for more than
// fits. Within the window a load is planned unless the access is an
// overwrite (it needs no contents), the tensor has no contents, a predicted
// write on another tier comes before it (the copy would be stale by its
// use, e.g. next step's weights before the optimizer updates them), the tier
// is slower than the tensor's home (no such copy exists), the copy is
// already there or coming, or it is a host copy that would come from NVMe
// while a predicted device access of the tensor comes first: that access
// brings a device copy, which then feeds the host over D2H instead of a
// second NVMe read (the weight a host optimizer updates right after the
// backward pass read it on the device: the MLP's prefetch then loaded it
// twice from NVMe, to the host and to the device). NVMe accesses are never
// prefetched (home copies).
//
// Timing: with the predicted seconds until each access, a load in the window
// is planned only once it cannot wait: loads on one link run one after
// another in trace order (those already in flight included), so each has a
// latest start — its access's time, or the next load's latest start if
// sooner, less its own transfer time, less the transfer times of the loads
// already in flight on the link (they go first) — and a load is planned
// when that latest start comes before the next access (the next chance to
// plan). A far
// load then starts as late as the link allows and holds no room while the
// copies needed before it come and go (an early load makes the tier evict
// copies that are read again before the load is used). Without times every
// load in the window is planned at once.
//
// Thread safety: a pure function; `lookup` is called on the calling thread.
#ifndef STRATA_SCHEDULER_PREFETCH_PLANNER_H_
#define STRATA_SCHEDULER_PREFETCH_PLANNER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "scheduler/access_trace.h"
#include "strata/tensor.h"

namespace strata {

// What the planner needs to know of one tensor on one tier.
struct PrefetchFacts {
  uint64_t bytes = 0;  // the tensor's size rounded to the tier's granule
  Tier home = Tier::kNvme;
  bool has_contents = false;
  // The copy on the tier is absent and no prefetch of it is pending: a load
  // would bring it.
  bool loadable = false;
  // A load of the copy is queued or running: it takes its turn on `link`
  // but is not planned again.
  bool in_flight = false;
  // The queue a load of the copy joins (the link from its nearest source);
  // loads on different links do not wait for each other.
  int link = 0;
  // Seconds a load of the copy takes on `link` (may be +infinity: unknown,
  // which makes it and every load queued before it urgent).
  double transfer_seconds = 0;
};

// Facts about tensor `id` on `tier`; nullopt when the store has no such
// tensor (the access is skipped and charges nothing).
using PrefetchLookup =
    absl::FunctionRef<std::optional<PrefetchFacts>(TensorId id, Tier tier)>;

struct PrefetchRequest {
  TensorId id{};
  Tier tier = Tier::kDevice;

  friend bool operator==(const PrefetchRequest&,
                         const PrefetchRequest&) = default;
};

// The copies to prefetch for `upcoming` (the predicted accesses, nearest
// first), nearest first, each once. `lookahead_bytes[t]` bounds tier t's
// window (the NVMe entry is unused). `seconds[i]`, when given (as many as
// `upcoming`, non-decreasing), is the predicted seconds from now until
// upcoming[i]; empty: every access is predicted now (no timing rule).
std::vector<PrefetchRequest> PlanPrefetch(
    absl::Span<const AccessEvent> upcoming,
    const uint64_t (&lookahead_bytes)[kNumTiers], PrefetchLookup lookup,
    absl::Span<const double> seconds = {});

}  // namespace strata

#endif  // STRATA_SCHEDULER_PREFETCH_PLANNER_H_
