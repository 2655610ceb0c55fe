// access_trace.h: AccessEvent (one acquire as the scheduler sees it) and
// Trace, the recorded access sequence of one step plus, for every tensor, the
// sorted positions where the step uses it (so "next use" is a binary search).
//
// Align() replays a sequence against a trace with the predictor's cursor rule;
// the predictor uses it to judge at a step boundary how well a step fitted.
//
// Thread safety: none. Once the predictor stores a Trace only an event's
// access kind changes (SetAccess).
#ifndef STRATA_SCHEDULER_ACCESS_TRACE_H_
#define STRATA_SCHEDULER_ACCESS_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "strata/tensor.h"

namespace strata {

// One acquire: which tensor, on which tier, with which access. Two events are
// equal when all three fields are.
struct AccessEvent {
  TensorId id{};
  Tier tier = Tier::kDevice;
  Access access = Access::kRead;

  friend bool operator==(const AccessEvent&, const AccessEvent&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const AccessEvent& e) {
    return H::combine(std::move(h), e.id, e.tier, e.access);
  }
};

class Trace {
 public:
  Trace() = default;
  explicit Trace(absl::Span<const AccessEvent> events);

  // Appends one event. A trace holds at most 2^32 - 1 events; further appends
  // are ignored (the predictor caps steps far below that).
  void Append(const AccessEvent& event);

  size_t size() const { return events_.size(); }
  bool empty() const { return events_.empty(); }
  const AccessEvent& operator[](size_t position) const {
    return events_[position];
  }
  const std::vector<AccessEvent>& events() const { return events_; }

  // Sets the access kind of the event at `position` (< size()).
  void SetAccess(size_t position, Access access) {
    events_[position].access = access;
  }
  // The sorted positions where `id` is used (any tier, any access); empty when
  // the trace never uses it.
  absl::Span<const uint32_t> Positions(TensorId id) const;

  // The first position >= `from` where `id` is used; nullopt when none.
  std::optional<size_t> NextUse(TensorId id, size_t from) const;

  // The first position p with from <= p < limit and (*this)[p] == event;
  // nullopt when none.
  std::optional<size_t> Find(const AccessEvent& event, size_t from,
                             size_t limit) const;

 private:
  std::vector<AccessEvent> events_;
  absl::flat_hash_map<TensorId, std::vector<uint32_t>> positions_;
};

// End (exclusive) of a look-ahead window of `window_events` positions that
// starts at `cursor` in a trace of `size` events; saturates at `size`.
inline size_t WindowEnd(size_t cursor, size_t size, size_t window_events) {
  if (cursor >= size) return size;
  return window_events >= size - cursor ? size : cursor + window_events;
}

// How a step's sequence lines up against a trace replayed from position 0:
// an event at the cursor is a hit; else one found within `window_events`
// positions after the cursor is a resync (the cursor jumps past it); else it
// is a miss (cursor unchanged). `skipped` counts trace events jumped over by
// resyncs plus those left after the cursor at the end; `longest_miss_run`
// is the most misses in a row.
struct TraceAlignment {
  size_t hits = 0;
  size_t resyncs = 0;
  size_t misses = 0;
  size_t skipped = 0;
  size_t longest_miss_run = 0;
};
TraceAlignment Align(const Trace& trace, absl::Span<const AccessEvent> step,
                     size_t window_events);

}  // namespace strata

#endif  // STRATA_SCHEDULER_ACCESS_TRACE_H_
