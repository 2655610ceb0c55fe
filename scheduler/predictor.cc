// predictor.cc: Predictor's replay (Observe and the cursor rules) and its
// queries. Step boundaries and recording are in predictor_steps.cc.
#include "scheduler/predictor.h"

#include <algorithm>

namespace strata {
namespace {

PredictorOptions Sanitize(PredictorOptions options) {
  options.max_traces = std::max<size_t>(options.max_traces, 1);
  options.resync_window_events =
      std::max<size_t>(options.resync_window_events, 1);
  options.repeat_prefix_events =
      std::max<size_t>(options.repeat_prefix_events, 1);
  options.max_trace_events = std::max<size_t>(options.max_trace_events, 1);
  return options;
}

}  // namespace

Predictor::Predictor(const PredictorOptions& options)
    : options_(Sanitize(options)) {}

Predictor::~Predictor() = default;

PredictedUse Predictor::Observe(const AccessEvent& event, double at_seconds) {
  ++stats_.events;
  const Outcome outcome = Advance(event);
  switch (outcome) {
    case Outcome::kHit:
      ++stats_.hits;
      break;
    case Outcome::kResync:
      ++stats_.resyncs;
      break;
    case Outcome::kMiss:
      ++stats_.misses;
      break;
  }
  RecordTime(outcome, at_seconds);
  PredictedUse use{.step = step_serial_};
  if (outcome != Outcome::kMiss && current_ != nullptr && cursor_ > 0) {
    use.trace = current_->serial;
    use.position = static_cast<uint32_t>(cursor_ - 1);
  }
  const size_t before = step_.size();
  AppendToStep(event, at_seconds);
  // A boundary found while appending (or a truncated step) moved the event:
  // its release is not recorded.
  if (step_serial_ != use.step || step_.size() != before + 1) return {};
  use.in_step = static_cast<uint32_t>(before);
  return use;
}

void Predictor::ObserveRelease(const PredictedUse& use) {
  if (use.step != step_serial_ || use.in_step >= step_hold_ends_.size()) {
    return;
  }
  step_hold_ends_[use.in_step] = static_cast<uint32_t>(step_.size());
  // The replayed trace learns it too, as its times do.
  if (use.trace != 0 && current_ != nullptr && current_->serial == use.trace &&
      use.position < current_->hold_ends.size()) {
    current_->hold_ends[use.position] = static_cast<uint32_t>(
        std::max<size_t>(cursor_, use.position + size_t{1}));
  }
}

void Predictor::ObserveDiscard(const PredictedUse& use) {
  const auto at = static_cast<uint32_t>(step_.size());
  if (use.step == step_serial_ && use.in_step < step_discards_.size()) {
    step_discards_[use.in_step] = at;
  }
  // A discard more than a step after the acquire says nothing of a cycle.
  if (use.trace == 0 || use.step + 1 < step_serial_) return;
  Slot* slot = FindSlot(use.trace);
  if (slot != nullptr && use.position < slot->discards.size()) {
    slot->discards[use.position] = at;
  }
}

// The matched position's time is this replay's: the trace's times follow the
// step's as it speeds up (prefetches land) or slows down.
void Predictor::RecordTime(Outcome outcome, double at_seconds) {
  if (outcome == Outcome::kMiss || current_ == nullptr || cursor_ == 0) return;
  const double start = step_seconds_.empty() ? at_seconds : step_seconds_[0];
  current_->offsets[cursor_ - 1] = std::max(0.0, at_seconds - start);
}

// Moves the cursor for `event`, which is not yet in step_.
Predictor::Outcome Predictor::Advance(const AccessEvent& event) {
  if (current_ != nullptr && cursor_ < current_->trace.size() &&
      current_->trace[cursor_] == event) {
    ++cursor_;
    ++step_matched_;
    return Outcome::kHit;
  }
  if (exact_prefix_) {
    if (SwitchToPrefixMatch(event)) return Outcome::kHit;
    exact_prefix_ = false;
  }
  if (current_ != nullptr) {
    const Trace& trace = current_->trace;
    std::optional<size_t> found = trace.Find(
        event, cursor_,
        WindowEnd(cursor_, trace.size(), options_.resync_window_events));
    if (found.has_value()) {
      cursor_ = *found + 1;
      ++step_matched_;
      return Outcome::kResync;
    }
    if (LearnAccessKind(event)) return Outcome::kHit;
    if (!explicit_steps_) {
      std::optional<Outcome> crossed = CrossDetectedBoundary(event);
      if (crossed.has_value()) return *crossed;
    }
  }
  if (step_matched_ == 0 && SwitchToLookahead(event)) return Outcome::kResync;
  return Outcome::kMiss;
}

// The acquire at the cursor with another access kind, found nowhere in the
// resync window (a step that only reads a tensor the recorded one wrote,
// say: a rolled-back update): the trace takes the new kind in place, and its
// generation changes so that a plan made from the old kind is made again.
// Without this the acquire would miss on every later step, and the rest of the
// trace fits too well for a re-record.
bool Predictor::LearnAccessKind(const AccessEvent& event) {
  if (current_ == nullptr || cursor_ >= current_->trace.size()) return false;
  const AccessEvent& expected = current_->trace[cursor_];
  if (expected.id != event.id || expected.tier != event.tier) return false;
  current_->trace.SetAccess(cursor_, event.access);
  ++current_->generation;
  ++cursor_;
  ++step_matched_;
  return true;
}

// While the step so far equals the first events of the current trace, finds
// another trace with that same prefix that predicts `event` next.
bool Predictor::SwitchToPrefixMatch(const AccessEvent& event) {
  const size_t k = step_.size();
  for (Slot* slot : SlotsByRecency()) {
    if (slot == current_) continue;
    const std::vector<AccessEvent>& events = slot->trace.events();
    if (events.size() > k && events[k] == event &&
        std::equal(step_.begin(), step_.end(), events.begin())) {
      current_ = slot;
      cursor_ = k + 1;
      ++step_matched_;
      return true;
    }
  }
  return false;
}

// While nothing in the step matched yet, picks the most recent other trace
// that holds `event` within the window from its start.
bool Predictor::SwitchToLookahead(const AccessEvent& event) {
  for (Slot* slot : SlotsByRecency()) {
    if (slot == current_) continue;
    const Trace& trace = slot->trace;
    std::optional<size_t> found = trace.Find(
        event, 0, WindowEnd(0, trace.size(), options_.resync_window_events));
    if (found.has_value()) {
      current_ = slot;
      cursor_ = *found + 1;
      ++step_matched_;
      return true;
    }
  }
  return false;
}

// Boundary detection with a known trace: `event` was not found ahead of the
// cursor; if it starts the next step (skipping few predicted events across the
// boundary), end this step and replay the next one from there.
std::optional<Predictor::Outcome> Predictor::CrossDetectedBoundary(
    const AccessEvent& event) {
  const size_t left = current_->trace.size() - cursor_;
  const size_t slack = std::max<size_t>(2, current_->trace.size() / 4);
  if (left > slack) return std::nullopt;
  const Trace& next = NextStepSlot(current_)->trace;
  if (!next.Find(event, 0, WindowEnd(0, next.size(), slack - left + 1))) {
    return std::nullopt;
  }
  FinishStep();  // replaces current_ with the trace predicted to follow
  if (current_ == nullptr) return Outcome::kMiss;
  const Trace& trace = current_->trace;
  std::optional<size_t> found = trace.Find(
      event, 0, WindowEnd(0, trace.size(), options_.resync_window_events));
  if (!found.has_value()) {
    exact_prefix_ = false;
    return Outcome::kMiss;
  }
  cursor_ = *found + 1;
  step_matched_ = 1;
  exact_prefix_ = *found == 0;
  return left == 0 && *found == 0 ? Outcome::kHit : Outcome::kResync;
}

std::vector<AccessEvent> Predictor::Upcoming(size_t n) const {
  std::vector<AccessEvent> upcoming;
  if (current_ == nullptr) return upcoming;
  upcoming.reserve(std::min<size_t>(n, 4096));
  const Slot* slot = current_;
  size_t position = cursor_;
  while (upcoming.size() < n) {
    const std::vector<AccessEvent>& events = slot->trace.events();
    for (; position < events.size() && upcoming.size() < n; ++position) {
      upcoming.push_back(events[position]);
    }
    slot = NextStepSlot(slot);  // traces are never empty: this terminates
    position = 0;
  }
  return upcoming;
}

std::vector<double> Predictor::UpcomingSeconds(size_t n) const {
  std::vector<double> seconds;
  if (current_ == nullptr) return seconds;
  seconds.reserve(std::min<size_t>(n, 4096));
  const Slot* slot = current_;
  size_t position = cursor_;
  // Times relative to the start of `slot`'s step, then shifted to "now": the
  // last observed event's time in the current trace.
  const double now = cursor_ > 0 ? slot->offsets[cursor_ - 1] : 0;
  double start = 0;
  double latest = 0;
  while (seconds.size() < n) {
    const std::vector<double>& offsets = slot->offsets;
    for (; position < offsets.size() && seconds.size() < n; ++position) {
      latest = std::max(latest, start + offsets[position] - now);
      seconds.push_back(latest);
    }
    start += slot->length_seconds > 0 ? slot->length_seconds : offsets.back();
    slot = NextStepSlot(slot);  // traces are never empty: this terminates
    position = 0;
  }
  return seconds;
}

bool Predictor::HeldAt(TensorId id, uint64_t distance) const {
  if (current_ == nullptr) return false;
  const Slot* slot = current_;
  size_t from = cursor_;  // the first position of `slot` still to come
  for (size_t hop = 0;; ++hop) {
    if (hop > slots_.size()) return false;
    const uint64_t left =
        slot->trace.size() - std::min(from, slot->trace.size());
    if (distance < left) break;
    distance -= left;
    slot = NextStepSlot(slot);
    from = 0;
  }
  const size_t at = from + distance;
  const absl::Span<const uint32_t> uses = slot->trace.Positions(id);
  const auto after = std::lower_bound(uses.begin(), uses.end(), at);
  if (after == uses.begin() || *(after - 1) < from) return false;
  return slot->hold_ends[*(after - 1)] > at;
}

bool Predictor::LeaseHeldAt(TensorId id, uint64_t distance) const {
  if (current_ == nullptr) return true;
  const absl::Span<const uint32_t> uses = current_->trace.Positions(id);
  const auto after = std::lower_bound(uses.begin(), uses.end(), cursor_);
  if (after == uses.begin()) return true;
  return current_->hold_ends[*(after - 1)] > cursor_ + distance;
}

std::optional<uint64_t> Predictor::NextUse(TensorId id, uint64_t skip) const {
  if (current_ == nullptr) return std::nullopt;
  const Slot* slot = current_;
  size_t from = cursor_;
  uint64_t distance = 0;
  // Whole steps, then part of one, are skipped first; past the chain's
  // repeat (slots_.size() hops) nothing new comes.
  for (size_t hop = 0; skip > 0; ++hop) {
    if (hop > slots_.size()) return std::nullopt;
    const uint64_t left =
        slot->trace.size() - std::min(from, slot->trace.size());
    if (skip < left) {
      from += skip;
      distance += skip;
      break;
    }
    skip -= left;
    distance += left;
    slot = NextStepSlot(slot);
    from = 0;
  }
  // The chain of following steps revisits a trace after slots_.size() hops.
  for (size_t hop = 0; hop <= slots_.size(); ++hop) {
    std::optional<size_t> position = slot->trace.NextUse(id, from);
    if (position.has_value()) return distance + (*position - from);
    distance += slot->trace.size() - std::min(from, slot->trace.size());
    slot = NextStepSlot(slot);
    from = 0;
  }
  return std::nullopt;
}

}  // namespace strata
