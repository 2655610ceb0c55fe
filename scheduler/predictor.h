// predictor.h: Predictor, the scheduler's trace-and-replay access predictor.
//
// It learns the acquire sequence of a training step and replays it with a
// cursor, so the store can prefetch the next accesses (Upcoming) and evict the
// copy used furthest in the future (NextUse, for Belady).
//
// Policy:
// - Steps. BeginStep()/EndStep() mark boundaries; once either has been called
//   the predictor trusts them and stops guessing. Before that, a boundary is
//   detected (a) when the events recorded since the last boundary end with a
//   repeat of their own first `repeat_prefix_events` events (the learning
//   rule: the cycle is the part before the repeat), or (b) once a trace is
//   known, when an event is found at the start of the next step while at most
//   max(2, size/4) predicted events are skipped across the boundary. Detection
//   learns one cycle; steps of different shapes need explicit boundaries.
// - Replay. An event at the cursor is a hit. Otherwise it is looked for in the
//   next `resync_window_events` positions: found, the cursor jumps past it (a
//   resync: a skipped layer, a branch); not found, it is a miss (no
//   prediction, cursor unchanged). One mismatch never discards a trace.
// - Shapes. Up to `max_traces` traces are kept; the least recently used goes
//   beyond that. A step starts on the trace predicted to follow the previous
//   one (the trace that followed it last time, else the same). While every
//   event so far matched from position 0, an event the trace does not predict
//   switches to another trace with the same prefix that does (so a train step
//   and an eval step sharing their first layers each find their own trace);
//   while nothing matched yet, to the most recent trace holding the event
//   within the window.
// - Times. Each acquire comes with the caller's clock (seconds, any origin);
//   a trace keeps, per position, the seconds from its step's first event at
//   its last replay (positions a step skipped keep older times) and the
//   seconds from its first event to the next step's, so UpcomingSeconds can
//   say how soon each predicted access comes. Without a clock (all 0) every
//   access is predicted now.
// - Holds. An acquire's lease is held until its release (ObserveRelease):
//   a trace keeps, per position, the position of the first acquire after
//   that release at its last replay (the next one by default), so HeldAt can
//   say whether a copy used before a predicted access is still leased at it
//   (an optimizer step holds a weight, its gradient and both moments at once:
//   none of them can be evicted for another).
// - Recording, at each boundary, for the step's sequence S against the trace T
//   it ended on: nothing matched -> S is stored as a new shape; with explicit
//   boundaries, S and T one a prefix of the other and their lengths differing
//   by >= `shape_length_fraction` of the longer, or S leaving that fraction
//   of T unvisited (skipped over or after its end) with at most
//   `rerecord_miss_fraction` of its events missed -> S is stored as a new
//   shape;
//   more than `rerecord_miss_fraction` of S's events were misses (replayed
//   from position 0), more than `resync_window_events` misses came in a
//   row (a region T does not know), or S missed and is the very sequence
//   the step before it on T was (the step changed for good, not once: an
//   optimizer that now interleaves its updates with the backward pass) ->
//   S replaces T (a re-record); otherwise T is kept.
//
// Thread safety: none. The store calls it with its mutex held.
#ifndef STRATA_SCHEDULER_PREDICTOR_H_
#define STRATA_SCHEDULER_PREDICTOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/access_trace.h"
#include "strata/tensor.h"

namespace strata {

// Tunables; a value of 0 is taken as 1.
struct PredictorOptions {
  // Distinct step shapes kept; least recently used replaced beyond. Default: 8.
  size_t max_traces = 8;
  // How far past the cursor a divergent event is looked for. Default: 64.
  size_t resync_window_events = 64;
  // A step whose misses exceed this fraction of its events re-records its
  // trace. Default: 0.5.
  double rerecord_miss_fraction = 0.5;
  // Explicit steps only: a step that is a prefix of its trace (or the trace
  // of it) and differs in length by at least this fraction of the longer is a
  // distinct shape. Default: 0.5.
  double shape_length_fraction = 0.5;
  // Events that must repeat to detect a step boundary without explicit
  // boundaries. Default: 4.
  size_t repeat_prefix_events = 4;
  // Longest step recorded; longer explicit steps are truncated, longer
  // detected ones end there. Default: 1 << 20.
  size_t max_trace_events = size_t{1} << 20;
};

struct PredictorStats {
  uint64_t steps = 0;            // steps ended (empty steps not counted)
  uint64_t events = 0;           // Observe() calls
  uint64_t hits = 0;             // event was the one at the cursor
  uint64_t resyncs = 0;          // event found further ahead; cursor jumped
  uint64_t misses = 0;           // no prediction for the event
  uint64_t rerecords = 0;        // traces replaced after a divergent step
  uint64_t traces_recorded = 0;  // traces stored: new shapes and re-records
};

// Where Observe put an acquire: the step it came in and its place in that
// step and in the trace replayed, for ObserveRelease.
struct PredictedUse {
  uint64_t step = 0;      // the predictor's step serial
  uint64_t trace = 0;     // serial of the trace it matched; 0: none
  uint32_t position = 0;  // its position in that trace
  uint32_t in_step = 0;   // its position in the step
};

// One learned step shape as the residency planner reads it. The spans
// point into the predictor and stay valid until its next call.
struct StepShape {
  uint64_t serial = 0;  // the trace's stable name
  // Bumped each time the trace is (re)recorded or learns an access kind.
  uint64_t generation = 0;
  uint64_t steps = 0;  // steps ended on it, its recording included
  const Trace* trace = nullptr;
  // Per position: seconds from the step's first acquire at its last
  // replay, and the position of the first acquire after its lease ended.
  absl::Span<const double> offsets;
  absl::Span<const uint32_t> hold_ends;
  // Per position: where the contents that acquire left were discarded, as
  // the latest Discard of them seen since the trace was recorded said: the
  // position of the first acquire after it (this step's or, cyclically,
  // the next's); Predictor::kNotDiscarded when none was seen (kept until
  // the next use).
  absl::Span<const uint32_t> discards;
  double length_seconds = 0;  // first acquire to the next step's; 0: unknown
};

class Predictor {
 public:
  explicit Predictor(const PredictorOptions& options = {});
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;
  ~Predictor();

  // End the current step (if it saw any event) and start a new one. Either
  // call turns off boundary detection for good; calling both is fine.
  void BeginStep();
  void EndStep();

  // Records one acquire at `at_seconds` on the caller's clock (any origin,
  // never decreasing; 0 throughout: no times) and advances the cursor (hit,
  // resync or miss). Returns where it went, for ObserveRelease.
  PredictedUse Observe(const AccessEvent& event, double at_seconds = 0);

  // Records that the lease of the acquire `use` ended now. A release after
  // its step ended is ignored.
  void ObserveRelease(const PredictedUse& use);

  // Records that the contents the acquire `use` left were discarded now
  // (Store::Discard): they died here, not at the next overwrite. A discard
  // in the step after the acquire's is kept for the trace it replayed; a
  // later one is ignored.
  void ObserveDiscard(const PredictedUse& use);
  // StepShape::discards' value for contents not seen discarded.
  static constexpr uint32_t kNotDiscarded = UINT32_MAX;

  // The next `n` predicted events after the cursor, continuing into the step
  // predicted to follow; fewer (none) only without a prediction.
  std::vector<AccessEvent> Upcoming(size_t n) const;

  // For each of Upcoming(n)'s events, the predicted seconds from the last
  // observed acquire until it (>= 0, non-decreasing), from the times the
  // traces were last replayed with.
  std::vector<double> UpcomingSeconds(size_t n) const;

  // Distance in events from the cursor to the next predicted use of `id` (0:
  // it is the next predicted event), looking through the rest of this step and
  // the steps predicted to follow; nullopt when no trace predicts it. Any tier
  // and access count as a use: whatever copy is evicted, a use needs the bytes.
  std::optional<uint64_t> NextUse(TensorId id) const { return NextUse(id, 0); }
  // The same, for the first use at least `skip` events from the cursor.
  std::optional<uint64_t> NextUse(TensorId id, uint64_t skip) const;

  // Whether a lease taken by a predicted use of `id` before the predicted
  // event `distance` events from the cursor (in the same step, at or after
  // the cursor) is predicted to be held at that event.
  bool HeldAt(TensorId id, uint64_t distance) const;
  // Whether the lease that this step's last use of `id` before the cursor
  // took is predicted to be still held at the event `distance` events from
  // the cursor (false past this step's end: leases end with their step).
  // True when no such use is predicted: a lease the trace does not explain
  // is not predicted to end.
  bool LeaseHeldAt(TensorId id, uint64_t distance) const;

  // The shape of trace `serial`; nullopt when no such trace is kept.
  std::optional<StepShape> Shape(uint64_t serial) const;
  // Serial of the trace being replayed; 0: none.
  uint64_t current_trace() const {
    return current_ != nullptr ? current_->serial : 0;
  }
  // Serial of the trace the last finished step ended on; 0: none.
  uint64_t previous_trace() const {
    return previous_ != nullptr ? previous_->serial : 0;
  }

  bool has_prediction() const { return current_ != nullptr; }
  const PredictorStats& stats() const { return stats_; }
  size_t trace_count() const { return slots_.size(); }
  // Every stored trace's serial, in no particular order.
  std::vector<uint64_t> trace_serials() const {
    std::vector<uint64_t> out;
    for (const auto& slot : slots_) out.push_back(slot->serial);
    return out;
  }
  // Every stored trace (step shape), in no particular order.
  std::vector<const Trace*> traces() const {
    std::vector<const Trace*> out;
    for (const auto& slot : slots_) out.push_back(&slot->trace);
    return out;
  }

 private:
  // One stored trace (a step shape).
  struct Slot {
    uint64_t serial = 0;  // stable name; kept across re-records
    // SetTrace calls (recordings and re-records) and access kinds learned
    uint64_t generation = 0;
    uint64_t steps = 0;      // steps ended on it
    Trace trace;             // never empty
    uint64_t last_used = 0;  // use_clock_ when a step last ended on it
    uint64_t successor = 0;  // serial of the trace that followed it; 0: none
    // Per position, seconds from the step's first event; trace.size() long.
    std::vector<double> offsets;
    // Seconds from the step's first event to the next step's; 0: unknown.
    double length_seconds = 0;
    // Per position, the position of the first acquire after its lease's
    // release (position + 1: released before the next acquire).
    std::vector<uint32_t> hold_ends;
    std::vector<uint32_t> discards;  // StepShape::discards
    // Hash of the last step replayed on it that missed; 0: it did not miss.
    size_t missed_step_hash = 0;
  };
  enum class Outcome { kHit, kResync, kMiss };

  Outcome Advance(const AccessEvent& event);
  bool LearnAccessKind(const AccessEvent& event);
  bool SwitchToPrefixMatch(const AccessEvent& event);
  bool SwitchToLookahead(const AccessEvent& event);
  std::optional<Outcome> CrossDetectedBoundary(const AccessEvent& event);
  void AppendToStep(const AccessEvent& event, double at_seconds);
  void RecordTime(Outcome outcome, double at_seconds);
  void SetTrace(Slot* slot);
  void DetectRepetition();
  void FinishStep();
  Slot* RecordStep();
  bool IsDistinctShape(const Trace& trace) const;
  Slot* AddSlot();
  Slot* FindSlot(uint64_t serial) const;
  Slot* NextStepSlot(const Slot* slot) const;
  std::vector<Slot*> SlotsByRecency() const;

  const PredictorOptions options_;

  std::vector<std::unique_ptr<Slot>> slots_;
  uint64_t next_serial_ = 1;
  uint64_t use_clock_ = 0;
  bool explicit_steps_ = false;

  // Replay state of the current step.
  Slot* current_ = nullptr;        // trace being replayed; null: no prediction
  size_t cursor_ = 0;              // position of the next predicted event
  bool exact_prefix_ = true;       // every event of the step so far was a hit
  size_t step_matched_ = 0;        // hits and resyncs in the step so far
  std::vector<AccessEvent> step_;  // the step's events so far
  std::vector<double> step_seconds_;  // when each of step_ was observed
  // Per event of step_, the step position of the first acquire after its
  // release; position + 1 until released.
  std::vector<uint32_t> step_hold_ends_;
  std::vector<uint32_t> step_discards_;  // per event of step_, as discards
  uint64_t step_serial_ = 1;             // names the step being observed
  double previous_start_seconds_ = 0;    // the previous step's first event
  Slot* previous_ = nullptr;             // trace of the previous step

  PredictorStats stats_;
};

}  // namespace strata

#endif  // STRATA_SCHEDULER_PREDICTOR_H_
