// access_trace.cc: Trace's per-tensor position index and Align().
#include "scheduler/access_trace.h"

#include <algorithm>
#include <limits>

namespace strata {

Trace::Trace(absl::Span<const AccessEvent> events) {
  events_.reserve(events.size());
  for (const AccessEvent& event : events) Append(event);
}

void Trace::Append(const AccessEvent& event) {
  if (events_.size() >= std::numeric_limits<uint32_t>::max()) return;
  positions_[event.id].push_back(static_cast<uint32_t>(events_.size()));
  events_.push_back(event);
}

absl::Span<const uint32_t> Trace::Positions(TensorId id) const {
  auto it = positions_.find(id);
  if (it == positions_.end()) return {};
  return it->second;
}

std::optional<size_t> Trace::NextUse(TensorId id, size_t from) const {
  absl::Span<const uint32_t> positions = Positions(id);
  auto it = std::lower_bound(positions.begin(), positions.end(), from);
  if (it == positions.end()) return std::nullopt;
  return *it;
}

std::optional<size_t> Trace::Find(const AccessEvent& event, size_t from,
                                  size_t limit) const {
  absl::Span<const uint32_t> positions = Positions(event.id);
  for (auto it = std::lower_bound(positions.begin(), positions.end(), from);
       it != positions.end() && *it < limit; ++it) {
    if (events_[*it] == event) return *it;
  }
  return std::nullopt;
}

TraceAlignment Align(const Trace& trace, absl::Span<const AccessEvent> step,
                     size_t window_events) {
  TraceAlignment alignment;
  size_t cursor = 0;
  size_t run = 0;  // misses in a row so far
  for (const AccessEvent& event : step) {
    if (cursor < trace.size() && trace[cursor] == event) {
      ++alignment.hits;
      ++cursor;
      run = 0;
      continue;
    }
    std::optional<size_t> found = trace.Find(
        event, cursor, WindowEnd(cursor, trace.size(), window_events));
    if (found.has_value()) {
      ++alignment.resyncs;
      alignment.skipped += *found - cursor;
      cursor = *found + 1;
      run = 0;
    } else {
      ++alignment.misses;
      alignment.longest_miss_run = std::max(alignment.longest_miss_run, ++run);
    }
  }
  alignment.skipped += trace.size() - std::min(cursor, trace.size());
  return alignment;
}

}  // namespace strata
