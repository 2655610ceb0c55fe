// Unit tests for what the Predictor learns from replays beyond the order of
// the acquires: an access kind that changed in place, a step that misses
// the same way twice (re-recorded), and where the contents an acquire left
// were discarded (StepShape::discards).
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/access_trace.h"
#include "scheduler/predictor.h"

namespace strata {
namespace {

constexpr uint32_t kKept = Predictor::kNotDiscarded;

AccessEvent Dev(uint64_t id, Access access = Access::kRead) {
  return AccessEvent{TensorId{id}, Tier::kDevice, access};
}
AccessEvent Host(uint64_t id, Access access) {
  return AccessEvent{TensorId{id}, Tier::kHost, access};
}

void RunStep(Predictor& p, const std::vector<AccessEvent>& events) {
  p.BeginStep();
  for (const AccessEvent& e : events) p.Observe(e);
  p.EndStep();
}

uint64_t Generation(const Predictor& p, uint64_t serial) {
  return p.Shape(serial)->generation;
}

Access AccessAt(const Predictor& p, uint64_t serial, size_t position) {
  return (*p.Shape(serial)->trace)[position].access;
}

std::vector<uint32_t> Discards(const Predictor& p, uint64_t serial) {
  const StepShape shape = *p.Shape(serial);
  return std::vector<uint32_t>(shape.discards.begin(), shape.discards.end());
}

// A step recorded writing X on the host (position 1) now only reads it (a
// rolled-back update): the acquire is a hit, not a miss, the trace takes
// the read in place, and its generation moves once (so a plan made from
// the write is made again), not again on the next identical step.
TEST(PredictorLearningTest, LearnsAChangedAccessKindInPlace) {
  const std::vector<AccessEvent> written = {Dev(10), Host(1, Access::kWrite),
                                            Dev(11), Dev(12, Access::kWrite)};
  const std::vector<AccessEvent> read = {Dev(10), Host(1, Access::kRead),
                                         Dev(11), Dev(12, Access::kWrite)};
  Predictor p;
  RunStep(p, written);
  const uint64_t serial = p.previous_trace();
  ASSERT_NE(serial, 0u);
  const uint64_t recorded = Generation(p, serial);
  ASSERT_EQ(AccessAt(p, serial, 1), Access::kWrite);

  p.BeginStep();
  p.Observe(read[0]);
  const PredictedUse use = p.Observe(read[1]);
  EXPECT_EQ(use.trace, serial) << "the acquire is placed in the trace";
  EXPECT_EQ(use.position, 1u);
  EXPECT_EQ(AccessAt(p, serial, 1), Access::kRead);
  EXPECT_EQ(Generation(p, serial), recorded + 1);
  p.Observe(read[2]);
  p.Observe(read[3]);
  p.EndStep();
  EXPECT_EQ(p.stats().hits, 4u);
  EXPECT_EQ(p.stats().misses, 4u) << "all from the recording";
  EXPECT_EQ(p.stats().resyncs, 0u);
  EXPECT_EQ(p.stats().rerecords, 0u);
  EXPECT_EQ(p.trace_count(), 1u);
  EXPECT_EQ(Generation(p, serial), recorded + 1);

  RunStep(p, read);
  EXPECT_EQ(p.stats().hits, 8u);
  EXPECT_EQ(p.stats().misses, 4u);
  EXPECT_EQ(Generation(p, serial), recorded + 1) << "nothing new to learn";
  EXPECT_EQ(p.stats().traces_recorded, 1u);
  EXPECT_EQ(p.Upcoming(4), read);
}

// The same tensor and tier with the other access kind further on, within
// the resync window, is that later acquire: the cursor resyncs to it and
// the trace learns nothing. A forward/backward step replayed in reverse
// (W1's backward first, where the trace has its forward) therefore still
// misses the rest and re-records, as PersistentDivergenceReRecordsOnce
// shows.
TEST(PredictorLearningTest, TheOtherKindAheadInTheWindowIsAResync) {
  std::vector<AccessEvent> train = {Dev(1), Dev(2), Dev(3)};
  for (uint64_t id = 3; id >= 1; --id) {
    train.push_back(Dev(id, Access::kWrite));  // the backward
  }
  const std::vector<AccessEvent> reversed(train.rbegin(), train.rend());
  Predictor p;
  RunStep(p, train);
  const uint64_t serial = p.previous_trace();
  const uint64_t recorded = Generation(p, serial);
  p.BeginStep();
  p.Observe(reversed[0]);  // W1 written: position 5, not a read at 0
  EXPECT_EQ(p.stats().resyncs, 1u);
  EXPECT_EQ(AccessAt(p, serial, 0), Access::kRead);
  EXPECT_EQ(Generation(p, serial), recorded);
  for (size_t i = 1; i < reversed.size(); ++i) p.Observe(reversed[i]);
  p.EndStep();
  EXPECT_EQ(p.stats().misses, 6u + 5u);  // past the trace's end: no learning
  EXPECT_EQ(p.stats().rerecords, 1u);
  EXPECT_EQ(p.Upcoming(6), reversed);

  // Beyond the window the other kind is not seen: the acquire at the
  // cursor learns it.
  PredictorOptions options;
  options.resync_window_events = 2;
  Predictor q(options);
  const std::vector<AccessEvent> far = {Host(1, Access::kWrite), Dev(10),
                                        Dev(11), Host(1, Access::kRead)};
  RunStep(q, far);
  const uint64_t far_serial = q.previous_trace();
  q.BeginStep();
  q.Observe(Host(1, Access::kRead));
  EXPECT_EQ(q.stats().hits, 1u);
  EXPECT_EQ(q.stats().resyncs, 0u);
  EXPECT_EQ(AccessAt(q, far_serial, 0), Access::kRead);
  EXPECT_EQ(AccessAt(q, far_serial, 3), Access::kRead);
  EXPECT_EQ(Generation(q, far_serial), 2u);
}

// A 100-acquire step, and the same with every 4th acquire replaced by one
// of a tensor the step never uses.
std::vector<AccessEvent> Hundred() {
  std::vector<AccessEvent> step;
  for (uint64_t i = 1; i <= 100; ++i) step.push_back(Dev(i));
  return step;
}
std::vector<AccessEvent> EveryFourthUnknown() {
  std::vector<AccessEvent> divergent = Hundred();
  for (size_t i = 3; i < divergent.size(); i += 4) divergent[i] = Dev(1000 + i);
  return divergent;
}

// A 100-acquire step whose every 4th acquire is an unknown tensor: 25%
// misses (below rerecord_miss_fraction) in runs of one (below the resync
// window). Once is noise and keeps the trace; the same step twice in a row
// changed for good and is re-recorded, once, and the step after hits
// throughout.
TEST(PredictorLearningTest, AStepThatMissesTheSameWayTwiceIsReRecorded) {
  const std::vector<AccessEvent> step = Hundred();
  const std::vector<AccessEvent> divergent = EveryFourthUnknown();

  Predictor p;
  RunStep(p, step);
  const uint64_t serial = p.previous_trace();
  // Each unknown misses; the acquire after it (none after the last, 99)
  // resyncs past the one it replaced.
  RunStep(p, divergent);
  EXPECT_EQ(p.stats().misses, 100u + 25u);
  EXPECT_EQ(p.stats().resyncs, 24u);
  EXPECT_EQ(p.stats().hits, 51u);
  EXPECT_EQ(p.stats().rerecords, 0u);
  EXPECT_EQ(p.Shape(serial)->trace->events(), step);

  RunStep(p, divergent);
  EXPECT_EQ(p.stats().misses, 100u + 50u);
  EXPECT_EQ(p.stats().rerecords, 1u);
  EXPECT_EQ(p.stats().traces_recorded, 2u);
  EXPECT_EQ(p.trace_count(), 1u);
  EXPECT_EQ(p.Shape(serial)->trace->events(), divergent);

  RunStep(p, divergent);
  EXPECT_EQ(p.stats().misses, 150u) << "the third step misses nothing";
  EXPECT_EQ(p.stats().hits, 51u + 51u + 100u);
  EXPECT_EQ(p.stats().rerecords, 1u);
}

// A divergent step with the original between two of them is a one-off each
// time: nothing is re-recorded, and the original keeps hitting.
TEST(PredictorLearningTest, OneOffDivergentStepsReRecordNothing) {
  const std::vector<AccessEvent> step = Hundred();
  const std::vector<AccessEvent> divergent = EveryFourthUnknown();

  Predictor p;
  RunStep(p, step);
  RunStep(p, divergent);
  RunStep(p, step);
  EXPECT_EQ(p.stats().misses, 100u + 25u) << "the original still fits";
  RunStep(p, divergent);  // the same as two steps ago, not as the last
  RunStep(p, step);
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.misses, 100u + 25u + 25u);
  EXPECT_EQ(s.hits, 51u + 100u + 51u + 100u);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(s.traces_recorded, 1u);
  EXPECT_EQ(p.Shape(p.previous_trace())->trace->events(), step);
}

// A replay discards the contents B's acquire (position 1) left after D's
// acquire: the trace records the step position of the next acquire (E's,
// 4) as where they died; the positions never discarded stay kept.
TEST(PredictorLearningTest, ObserveDiscardRecordsWhereContentsDied) {
  const std::vector<AccessEvent> step = {Dev(1), Dev(2), Dev(3), Dev(4),
                                         Dev(5)};
  Predictor p;
  RunStep(p, step);
  const uint64_t serial = p.previous_trace();
  EXPECT_EQ(Discards(p, serial), std::vector<uint32_t>(5, kKept));

  p.BeginStep();
  p.Observe(step[0]);
  const PredictedUse b = p.Observe(step[1]);
  ASSERT_EQ(b.trace, serial);
  ASSERT_EQ(b.position, 1u);
  p.Observe(step[2]);
  p.Observe(step[3]);
  p.ObserveDiscard(b);
  p.Observe(step[4]);
  p.EndStep();
  EXPECT_EQ(Discards(p, serial),
            (std::vector<uint32_t>{kKept, 4, kKept, kKept, kKept}));
  EXPECT_EQ(p.stats().rerecords, 0u);

  // E's contents (position 4) discarded in the next step, after A's and B's
  // acquires and before E's own: they died at position 2 of the next step.
  p.BeginStep();
  for (size_t i = 0; i < 4; ++i) p.Observe(step[i]);
  const PredictedUse e = p.Observe(step[4]);
  ASSERT_EQ(e.position, 4u);
  p.EndStep();
  p.BeginStep();
  p.Observe(step[0]);
  p.Observe(step[1]);
  p.ObserveDiscard(e);
  EXPECT_EQ(Discards(p, serial)[4], 2u);
  for (size_t i = 2; i < step.size(); ++i) p.Observe(step[i]);
  p.EndStep();
  EXPECT_EQ(Discards(p, serial)[4], 2u);
  EXPECT_EQ(Discards(p, serial)[0], kKept);
  EXPECT_EQ(Discards(p, serial)[2], kKept);
  EXPECT_EQ(p.stats().misses, 5u) << "all from the recording";

  // A discard two steps after the acquire (C's of the step before last)
  // says nothing of the cycle: ignored.
  p.BeginStep();
  p.Observe(step[0]);
  p.Observe(step[1]);
  const PredictedUse c = p.Observe(step[2]);
  for (size_t i = 3; i < step.size(); ++i) p.Observe(step[i]);
  p.EndStep();
  for (int k = 0; k < 2; ++k) {
    p.BeginStep();
    for (const AccessEvent& event : step) p.Observe(event);
    p.EndStep();
  }
  p.BeginStep();
  p.Observe(step[0]);
  p.ObserveDiscard(c);
  EXPECT_EQ(Discards(p, serial)[2], kKept);
}

// A discard in the step that records the trace (no trace replayed: the
// acquire was a miss) is recorded with the step.
TEST(PredictorLearningTest, ADiscardInTheRecordedStepIsKept) {
  Predictor p;
  p.BeginStep();
  const PredictedUse a = p.Observe(Dev(1, Access::kOverwrite));
  EXPECT_EQ(a.trace, 0u);
  EXPECT_EQ(a.in_step, 0u);
  p.Observe(Dev(2));
  p.ObserveDiscard(a);
  p.Observe(Dev(3));
  p.Observe(Dev(1, Access::kOverwrite));
  p.EndStep();
  EXPECT_EQ(Discards(p, p.previous_trace()),
            (std::vector<uint32_t>{2, kKept, kKept, kKept}));
}

}  // namespace
}  // namespace strata
