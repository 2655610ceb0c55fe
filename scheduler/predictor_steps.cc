// predictor_steps.cc: Predictor's step boundaries (explicit and detected),
// what a finished step records, and the LRU set of traces.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/hash/hash.h"
#include "scheduler/predictor.h"

namespace strata {

void Predictor::BeginStep() {
  explicit_steps_ = true;
  FinishStep();
}

void Predictor::EndStep() {
  explicit_steps_ = true;
  FinishStep();
}

void Predictor::AppendToStep(const AccessEvent& event, double at_seconds) {
  if (step_.size() >= options_.max_trace_events) {
    if (explicit_steps_) return;  // truncated; the step goes on unrecorded
    FinishStep();
  }
  // The first event of a step ends the previous step's period.
  if (step_.empty() && previous_ != nullptr) {
    previous_->length_seconds =
        std::max(0.0, at_seconds - previous_start_seconds_);
  }
  step_.push_back(event);
  step_seconds_.push_back(at_seconds);
  step_hold_ends_.push_back(static_cast<uint32_t>(step_.size()));
  step_discards_.push_back(kNotDiscarded);
  if (!explicit_steps_) DetectRepetition();
}

// The learning rule: when the step's events end with a repeat of their first
// K events, the cycle is everything before the repeat. The repeated events
// are replayed into the new step (they were counted when observed).
void Predictor::DetectRepetition() {
  const size_t k = options_.repeat_prefix_events;
  if (step_.size() <= k) return;
  const size_t boundary = step_.size() - k;
  if (!std::equal(step_.begin() + boundary, step_.end(), step_.begin())) {
    return;
  }
  std::vector<AccessEvent> repeat(step_.begin() + boundary, step_.end());
  std::vector<double> times(step_seconds_.begin() + boundary,
                            step_seconds_.end());
  step_.resize(boundary);
  step_seconds_.resize(boundary);
  step_hold_ends_.resize(boundary);
  step_discards_.resize(boundary);
  FinishStep();
  for (size_t i = 0; i < repeat.size(); ++i) {
    RecordTime(Advance(repeat[i]), times[i]);
    if (step_.empty() && previous_ != nullptr) {
      previous_->length_seconds =
          std::max(0.0, times[i] - previous_start_seconds_);
    }
    step_.push_back(repeat[i]);
    step_seconds_.push_back(times[i]);
    step_hold_ends_.push_back(static_cast<uint32_t>(step_.size()));
    step_discards_.push_back(kNotDiscarded);
  }
}

void Predictor::FinishStep() {
  if (step_.empty()) return;
  ++stats_.steps;
  Slot* slot = RecordStep();
  slot->last_used = ++use_clock_;
  ++slot->steps;
  if (previous_ != nullptr) previous_->successor = slot->serial;
  previous_ = slot;
  current_ = NextStepSlot(slot);
  cursor_ = 0;
  exact_prefix_ = true;
  step_matched_ = 0;
  previous_start_seconds_ = step_seconds_.front();
  step_.clear();
  step_seconds_.clear();
  step_hold_ends_.clear();
  step_discards_.clear();
  ++step_serial_;
}

// Decides what the finished step_ leaves behind: a new trace, a re-recorded
// one, or the trace it was replayed on, unchanged. Returns that trace.
Predictor::Slot* Predictor::RecordStep() {
  if (current_ == nullptr) return AddSlot();
  const TraceAlignment fit =
      Align(current_->trace, step_, options_.resync_window_events);
  if (fit.hits + fit.resyncs == 0) return AddSlot();
  if (explicit_steps_ && IsDistinctShape(current_->trace)) return AddSlot();
  // A step that the trace predicted (few misses) but that left at least
  // that fraction of it unvisited (an evaluation's forward pass replayed on
  // the training step, not quite its prefix) is a shape of its own too:
  // else its steps count as the trace's, and a plan for the whole step
  // runs on a part of it.
  const bool mostly_missed =
      static_cast<double>(fit.misses) >
      options_.rerecord_miss_fraction * static_cast<double>(step_.size());
  if (explicit_steps_ && !mostly_missed &&
      static_cast<double>(fit.skipped) >=
          options_.shape_length_fraction *
              static_cast<double>(current_->trace.size())) {
    return AddSlot();
  }
  // A run of misses longer than the resync window is a region of the step
  // the trace does not know at all (the optimizer switched to another
  // scheme, say), however small a fraction of the step it is: left alone,
  // every later step would miss it again and get no prefetch there.
  // A step that misses the same way twice in a row changed for good.
  const size_t hash = fit.misses > 0 ? absl::HashOf(step_) | 1 : 0;
  const bool missed_again = hash != 0 && hash == current_->missed_step_hash;
  current_->missed_step_hash = hash;
  if (static_cast<double>(fit.misses) >
          options_.rerecord_miss_fraction * static_cast<double>(step_.size()) ||
      fit.longest_miss_run > options_.resync_window_events || missed_again) {
    SetTrace(current_);
    ++stats_.rerecords;
    ++stats_.traces_recorded;
  }
  return current_;
}

// Whether step_ and `trace` share a prefix as long as the shorter of the two
// and differ in length enough to be two shapes (train and eval, say).
bool Predictor::IsDistinctShape(const Trace& trace) const {
  const std::vector<AccessEvent>& events = trace.events();
  const size_t shorter = std::min(events.size(), step_.size());
  const size_t longer = std::max(events.size(), step_.size());
  if (!std::equal(step_.begin(), step_.begin() + shorter, events.begin())) {
    return false;
  }
  return static_cast<double>(longer - shorter) >=
         options_.shape_length_fraction * static_cast<double>(longer);
}

// Stores step_ as a new trace, dropping the least recently used one beyond
// max_traces.
Predictor::Slot* Predictor::AddSlot() {
  auto slot = std::make_unique<Slot>();
  slot->serial = next_serial_++;
  SetTrace(slot.get());
  ++stats_.traces_recorded;
  if (slots_.size() >= options_.max_traces) {
    auto oldest = std::min_element(slots_.begin(), slots_.end(),
                                   [](const auto& a, const auto& b) {
                                     return a->last_used < b->last_used;
                                   });
    if (oldest->get() == current_) current_ = nullptr;
    if (oldest->get() == previous_) previous_ = nullptr;
    slots_.erase(oldest);
  }
  slots_.push_back(std::move(slot));
  return slots_.back().get();
}

// The finished step becomes `slot`'s trace, with its times.
void Predictor::SetTrace(Slot* slot) {
  ++slot->generation;
  slot->trace = Trace(step_);
  slot->offsets.resize(step_seconds_.size());
  for (size_t i = 0; i < step_seconds_.size(); ++i) {
    slot->offsets[i] = std::max(0.0, step_seconds_[i] - step_seconds_[0]);
  }
  slot->length_seconds = 0;
  slot->hold_ends = step_hold_ends_;
  slot->discards = step_discards_;
}

std::optional<StepShape> Predictor::Shape(uint64_t serial) const {
  const Slot* slot = FindSlot(serial);
  if (slot == nullptr) return std::nullopt;
  return StepShape{.serial = slot->serial,
                   .generation = slot->generation,
                   .steps = slot->steps,
                   .trace = &slot->trace,
                   .offsets = slot->offsets,
                   .hold_ends = slot->hold_ends,
                   .discards = slot->discards,
                   .length_seconds = slot->length_seconds};
}

Predictor::Slot* Predictor::FindSlot(uint64_t serial) const {
  for (const auto& slot : slots_) {
    if (slot->serial == serial) return slot.get();
  }
  return nullptr;
}

// The trace predicted for the step after one on `slot`: the one that followed
// it last time if still kept, else the same shape again.
Predictor::Slot* Predictor::NextStepSlot(const Slot* slot) const {
  Slot* next = slot->successor != 0 ? FindSlot(slot->successor) : nullptr;
  return next != nullptr ? next : FindSlot(slot->serial);
}

std::vector<Predictor::Slot*> Predictor::SlotsByRecency() const {
  std::vector<Slot*> slots;
  slots.reserve(slots_.size());
  for (const auto& slot : slots_) slots.push_back(slot.get());
  std::sort(slots.begin(), slots.end(), [](const Slot* a, const Slot* b) {
    return a->last_used > b->last_used;
  });
  return slots;
}

}  // namespace strata
