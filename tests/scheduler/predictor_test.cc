// Unit tests for the scheduler's Predictor (trace and replay) and Trace:
// exact replay, a skipped layer, a branch, unknown tensors, two step shapes,
// re-recording, next-use distances, boundary detection without BeginStep, and
// the predicted seconds until each upcoming access.
#include "scheduler/predictor.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <vector>

#include "scheduler/access_trace.h"

namespace strata {
namespace {

AccessEvent Fwd(uint64_t id) {
  return AccessEvent{TensorId{id}, Tier::kDevice, Access::kRead};
}
AccessEvent Bwd(uint64_t id) {
  return AccessEvent{TensorId{id}, Tier::kDevice, Access::kWrite};
}

// A 3-layer forward and backward: A, B, C, C', B', A'.
const std::vector<AccessEvent>& Train() {
  static const auto* train = new std::vector<AccessEvent>{
      Fwd(1), Fwd(2), Fwd(3), Bwd(3), Bwd(2), Bwd(1)};
  return *train;
}
// An eval step: A, B, C.
const std::vector<AccessEvent>& Eval() {
  static const auto* eval =
      new std::vector<AccessEvent>{Fwd(1), Fwd(2), Fwd(3)};
  return *eval;
}

void RunStep(Predictor& p, const std::vector<AccessEvent>& events) {
  p.BeginStep();
  for (const AccessEvent& e : events) p.Observe(e);
  p.EndStep();
}

TEST(TraceTest, PositionsNextUseAndFind) {
  Trace trace(Train());
  ASSERT_EQ(trace.size(), 6u);
  EXPECT_EQ(std::vector<uint32_t>(trace.Positions(TensorId{2}).begin(),
                                  trace.Positions(TensorId{2}).end()),
            (std::vector<uint32_t>{1, 4}));
  EXPECT_TRUE(trace.Positions(TensorId{9}).empty());
  EXPECT_EQ(trace.NextUse(TensorId{3}, 0), 2u);
  EXPECT_EQ(trace.NextUse(TensorId{3}, 3), 3u);
  EXPECT_EQ(trace.NextUse(TensorId{3}, 4), std::nullopt);
  EXPECT_EQ(trace.Find(Bwd(1), 0, 6), 5u);
  EXPECT_EQ(trace.Find(Bwd(1), 0, 5), std::nullopt);  // limit is exclusive
  EXPECT_EQ(trace.Find(Fwd(1), 1, 6), std::nullopt);
}

TEST(TraceTest, AlignCountsHitsResyncsMisses) {
  Trace trace(Train());
  std::vector<AccessEvent> step = {Fwd(1), Fwd(3), Fwd(9),
                                   Bwd(3), Bwd(2), Bwd(1)};
  TraceAlignment a = Align(trace, step, 64);
  EXPECT_EQ(a.hits, 4u);
  EXPECT_EQ(a.resyncs, 1u);
  EXPECT_EQ(a.misses, 1u);
  EXPECT_EQ(a.skipped, 1u);
  EXPECT_EQ(a.longest_miss_run, 1u);
  // Two misses in a row, then a hit, then one more.
  step = {Fwd(1), Fwd(8), Fwd(9), Fwd(2), Fwd(7)};
  a = Align(trace, step, 64);
  EXPECT_EQ(a.misses, 3u);
  EXPECT_EQ(a.longest_miss_run, 2u);
}

TEST(PredictorTest, NoPredictionBeforeAnyTrace) {
  Predictor p;
  EXPECT_FALSE(p.has_prediction());
  EXPECT_TRUE(p.Upcoming(5).empty());
  EXPECT_EQ(p.NextUse(TensorId{1}), std::nullopt);
  p.BeginStep();
  p.Observe(Fwd(1));
  EXPECT_FALSE(p.has_prediction());
  EXPECT_EQ(p.stats().misses, 1u);
  p.EndStep();
  p.EndStep();  // an empty step is not a step
  EXPECT_EQ(p.stats().steps, 1u);
}

TEST(PredictorTest, ExactReplay) {
  Predictor p;
  RunStep(p, Train());
  EXPECT_EQ(p.stats().misses, 6u);
  EXPECT_EQ(p.trace_count(), 1u);
  const std::vector<AccessEvent>& t = Train();
  for (int step = 2; step <= 3; ++step) {
    p.BeginStep();
    for (size_t i = 0; i < t.size(); ++i) {
      ASSERT_TRUE(p.has_prediction());
      EXPECT_EQ(p.Upcoming(3), (std::vector<AccessEvent>{t[i], t[(i + 1) % 6],
                                                         t[(i + 2) % 6]}))
          << "step " << step << " event " << i;
      p.Observe(t[i]);
    }
    p.EndStep();
  }
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.steps, 3u);
  EXPECT_EQ(s.events, 18u);
  EXPECT_EQ(s.hits, 12u);
  EXPECT_EQ(s.resyncs, 0u);
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(s.traces_recorded, 1u);
}

TEST(PredictorTest, SkippedLayerResyncs) {
  Predictor p;
  RunStep(p, Train());
  p.BeginStep();
  p.Observe(Fwd(1));
  p.Observe(Fwd(3));  // layer 2's forward skipped
  EXPECT_EQ(p.stats().resyncs, 1u);
  EXPECT_EQ(p.Upcoming(2), (std::vector<AccessEvent>{Bwd(3), Bwd(2)}));
  p.Observe(Bwd(3));
  p.Observe(Bwd(2));
  p.Observe(Bwd(1));
  p.EndStep();
  EXPECT_EQ(p.stats().hits, 4u);
  EXPECT_EQ(p.stats().misses, 6u);  // all from the first step
  RunStep(p, Train());
  // The first layer skipped: the step starts with a resync.
  RunStep(p, {Fwd(2), Fwd(3), Bwd(3), Bwd(2), Bwd(1)});
  RunStep(p, Train());
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.resyncs, 2u);
  EXPECT_EQ(s.hits, 4u + 6u + 4u + 6u);
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(p.trace_count(), 1u);
}

TEST(PredictorTest, BranchIsOneMissAndKeepsTheTrace) {
  Predictor p;
  RunStep(p, Train());
  // Layer 3's forward takes another tensor (a branch, an MoE expert).
  RunStep(p, {Fwd(1), Fwd(2), Fwd(9), Bwd(3), Bwd(2), Bwd(1)});
  EXPECT_EQ(p.stats().misses, 6u + 1u);
  EXPECT_EQ(p.stats().resyncs, 1u);  // Bwd(3) skips the unused Fwd(3)
  EXPECT_EQ(p.stats().hits, 4u);
  EXPECT_EQ(p.stats().rerecords, 0u);
  RunStep(p, Train());
  EXPECT_EQ(p.stats().hits, 4u + 6u);
  EXPECT_EQ(p.stats().misses, 7u);
  EXPECT_EQ(p.stats().traces_recorded, 1u);
}

TEST(PredictorTest, NewTensorHasNoPrediction) {
  Predictor p;
  RunStep(p, Train());
  p.BeginStep();
  p.Observe(Fwd(1));
  p.Observe(Fwd(42));
  EXPECT_EQ(p.stats().misses, 7u);
  EXPECT_EQ(p.NextUse(TensorId{42}), std::nullopt);
  EXPECT_TRUE(p.has_prediction());
  EXPECT_EQ(p.Upcoming(2), (std::vector<AccessEvent>{Fwd(2), Fwd(3)}));
  for (size_t i = 1; i < Train().size(); ++i) p.Observe(Train()[i]);
  p.EndStep();
  EXPECT_EQ(p.stats().hits, 6u);
  EXPECT_EQ(p.stats().rerecords, 0u);
}

TEST(PredictorTest, TwoStepShapesEachFindTheirTrace) {
  Predictor p;
  RunStep(p, Train());
  RunStep(p, Eval());  // predicted by the train trace's prefix
  EXPECT_EQ(p.stats().hits, 3u);
  EXPECT_EQ(p.trace_count(), 2u);
  EXPECT_EQ(p.stats().rerecords, 0u);
  RunStep(p, Train());  // switches from the eval trace at C'
  EXPECT_EQ(p.stats().hits, 3u + 6u);
  // Each shape now knows which follows it.
  EXPECT_EQ(p.Upcoming(4),
            (std::vector<AccessEvent>{Fwd(1), Fwd(2), Fwd(3), Fwd(1)}));
  for (int round = 0; round < 2; ++round) {
    RunStep(p, Eval());
    EXPECT_EQ(p.Upcoming(6), Train());
    p.BeginStep();
    for (const AccessEvent& e : Eval()) p.Observe(e);
    EXPECT_EQ(p.Upcoming(1), std::vector<AccessEvent>{Bwd(3)});
    for (size_t i = 3; i < 6; ++i) p.Observe(Train()[i]);
    p.EndStep();
  }
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.hits, 9u + 2 * (3u + 6u));
  EXPECT_EQ(s.misses, 6u);
  EXPECT_EQ(s.resyncs, 0u);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(s.traces_recorded, 2u);
}

TEST(PredictorTest, PersistentDivergenceReRecordsOnce) {
  Predictor p;
  RunStep(p, Train());
  RunStep(p, Train());
  // The same tensors in the reverse order for a whole step: B1 resyncs to the
  // end of the trace, the other five miss.
  const std::vector<AccessEvent> reversed = {Bwd(1), Bwd(2), Bwd(3),
                                             Fwd(3), Fwd(2), Fwd(1)};
  RunStep(p, reversed);
  EXPECT_EQ(p.stats().rerecords, 1u);
  EXPECT_EQ(p.stats().misses, 6u + 5u);
  EXPECT_EQ(p.trace_count(), 1u);
  EXPECT_EQ(p.Upcoming(6), reversed);
  RunStep(p, reversed);
  RunStep(p, reversed);
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.hits, 6u + 12u);
  EXPECT_EQ(s.misses, 11u);
  EXPECT_EQ(s.rerecords, 1u);
  EXPECT_EQ(s.traces_recorded, 2u);
}

// A long step whose optimizer region changes scheme (the GPT's deferred
// clipping: grads read and moments written in EndStep instead of backup
// reads during backward): the new region is a small fraction of the step,
// far below rerecord_miss_fraction, but a run of misses longer than the
// resync window. The trace is re-recorded, so the next step predicts it.
TEST(PredictorTest, LongRunOfMissesReRecordsEvenWhenRare) {
  PredictorOptions options;
  options.resync_window_events = 8;
  Predictor p(options);
  std::vector<AccessEvent> step;
  for (uint64_t i = 1; i <= 200; ++i) step.push_back(Fwd(i));
  std::vector<AccessEvent> changed = step;
  for (uint64_t i = 1000; i < 1020; ++i) changed.push_back(Bwd(i));  // 20
  RunStep(p, step);
  RunStep(p, changed);  // 20 misses in a row: 9% of the step, run > 8
  EXPECT_EQ(p.stats().rerecords, 1u);
  RunStep(p, changed);
  EXPECT_EQ(p.stats().misses, 200u + 20u);  // the new region now hits
  EXPECT_EQ(p.stats().rerecords, 1u);
}

// Misses spread out (each run within the window) keep the trace.
TEST(PredictorTest, ScatteredMissesKeepTheTrace) {
  PredictorOptions options;
  options.resync_window_events = 8;
  Predictor p(options);
  std::vector<AccessEvent> step;
  for (uint64_t i = 1; i <= 200; ++i) step.push_back(Fwd(i));
  std::vector<AccessEvent> noisy;
  for (uint64_t i = 1; i <= 200; ++i) {
    noisy.push_back(Fwd(i));
    if (i % 10 == 0) noisy.push_back(Bwd(5000 + i));  // a miss per 10 hits
  }
  RunStep(p, step);
  RunStep(p, noisy);
  EXPECT_EQ(p.stats().rerecords, 0u);
  EXPECT_EQ(p.Upcoming(3), (std::vector<AccessEvent>{Fwd(1), Fwd(2), Fwd(3)}));
}

TEST(PredictorTest, StepOfUnknownTensorsIsANewShape) {
  Predictor p;
  RunStep(p, Train());
  const std::vector<AccessEvent> other = {Fwd(10), Fwd(11), Fwd(12)};
  RunStep(p, other);
  EXPECT_EQ(p.stats().rerecords, 0u);
  EXPECT_EQ(p.trace_count(), 2u);
  RunStep(p, other);
  RunStep(p, Train());
  EXPECT_EQ(p.stats().hits, 3u + 6u);
  EXPECT_EQ(p.stats().misses, 6u + 3u);
}

TEST(PredictorTest, LeastRecentlyUsedShapeIsDropped) {
  PredictorOptions options;
  options.max_traces = 2;
  Predictor p(options);
  const std::vector<AccessEvent> a = {Fwd(1), Fwd(2), Fwd(3)};
  const std::vector<AccessEvent> b = {Fwd(4), Fwd(5), Fwd(6)};
  const std::vector<AccessEvent> c = {Fwd(7), Fwd(8), Fwd(9)};
  RunStep(p, a);
  RunStep(p, b);
  RunStep(p, c);
  EXPECT_EQ(p.trace_count(), 2u);
  RunStep(p, b);  // kept
  EXPECT_EQ(p.stats().hits, 3u);
  RunStep(p, a);  // dropped: learned again, evicting c
  EXPECT_EQ(p.stats().hits, 3u);
  EXPECT_EQ(p.stats().misses, 12u);
  RunStep(p, a);
  RunStep(p, b);
  EXPECT_EQ(p.stats().hits, 9u);
  EXPECT_EQ(p.stats().traces_recorded, 4u);
}

TEST(PredictorTest, NextUseDistances) {
  Predictor p;
  RunStep(p, Train());  // positions: W1 {0, 5}, W2 {1, 4}, W3 {2, 3}
  p.BeginStep();
  EXPECT_EQ(p.NextUse(TensorId{1}), 0u);
  EXPECT_EQ(p.NextUse(TensorId{2}), 1u);
  EXPECT_EQ(p.NextUse(TensorId{3}), 2u);
  EXPECT_EQ(p.NextUse(TensorId{7}), std::nullopt);
  for (size_t i = 0; i < 4; ++i) p.Observe(Train()[i]);  // cursor 4
  EXPECT_EQ(p.NextUse(TensorId{2}), 0u);
  EXPECT_EQ(p.NextUse(TensorId{1}), 1u);
  EXPECT_EQ(p.NextUse(TensorId{3}), 4u);  // 2 left + position 2 next step
  p.Observe(Train()[4]);                  // cursor 5
  EXPECT_EQ(p.NextUse(TensorId{1}), 0u);
  EXPECT_EQ(p.NextUse(TensorId{2}), 2u);  // 1 left + position 1
  EXPECT_EQ(p.NextUse(TensorId{3}), 3u);
  p.Observe(Train()[5]);  // cursor 6: everything is next step
  EXPECT_EQ(p.NextUse(TensorId{1}), 0u);
  EXPECT_EQ(p.NextUse(TensorId{3}), 2u);
  p.EndStep();
  EXPECT_EQ(p.NextUse(TensorId{3}), 2u);
}

// An optimizer step: gradient G read, then weight W and moments M, V
// written, all four held until the step of the layer ends; then X, released
// at once. HeldAt says which copies are leased at a predicted access.
TEST(PredictorTest, HeldAtFollowsTheLeasesReleases) {
  const AccessEvent g = Fwd(10), w = Bwd(11), m = Bwd(12), v = Bwd(13),
                    x = Fwd(14);
  Predictor p;
  p.BeginStep();
  std::vector<PredictedUse> group;
  for (const AccessEvent& e : {g, w, m, v}) group.push_back(p.Observe(e));
  for (const PredictedUse& use : group) p.ObserveRelease(use);
  p.ObserveRelease(p.Observe(x));
  p.BeginStep();                           // positions: G 0, W 1, M 2, V 3, X 4
  EXPECT_TRUE(p.HeldAt(TensorId{11}, 3));  // W while V is acquired
  EXPECT_TRUE(p.HeldAt(TensorId{10}, 2));  // G while M is
  EXPECT_FALSE(p.HeldAt(TensorId{11}, 1));  // no use of W before its own
  EXPECT_FALSE(p.HeldAt(TensorId{13}, 4));  // released before X
  EXPECT_FALSE(p.HeldAt(TensorId{14}, 4));
  EXPECT_FALSE(p.HeldAt(TensorId{99}, 2));
  EXPECT_TRUE(p.HeldAt(TensorId{11}, 5 + 3));  // the next step's, too

  // This replay releases G before M: the trace learns it, and W stays held.
  const PredictedUse g_use = p.Observe(g);
  const PredictedUse w_use = p.Observe(w);
  p.ObserveRelease(g_use);
  std::vector<PredictedUse> rest = {w_use, p.Observe(m), p.Observe(v)};
  EXPECT_FALSE(p.HeldAt(TensorId{11}, 0));  // W's use is behind the cursor
  for (const PredictedUse& use : rest) p.ObserveRelease(use);
  p.ObserveRelease(p.Observe(x));
  p.BeginStep();
  EXPECT_FALSE(p.HeldAt(TensorId{10}, 2));
  EXPECT_TRUE(p.HeldAt(TensorId{11}, 3));

  // Held again: the trace follows the last replay both ways.
  auto held_step = [&](bool release_g) {
    std::vector<PredictedUse> uses;
    for (const AccessEvent& e : {g, w, m, v}) uses.push_back(p.Observe(e));
    for (size_t i = release_g ? 0 : 1; i < uses.size(); ++i) {
      p.ObserveRelease(uses[i]);
    }
    p.ObserveRelease(p.Observe(x));
    return uses[0];
  };
  held_step(true);
  p.BeginStep();
  EXPECT_TRUE(p.HeldAt(TensorId{10}, 2));

  // A lease released after its step ended changes nothing.
  const PredictedUse late = held_step(false);
  p.BeginStep();
  p.ObserveRelease(late);
  EXPECT_TRUE(p.HeldAt(TensorId{10}, 2));
  EXPECT_TRUE(p.HeldAt(TensorId{11}, 3));
}

// LeaseHeldAt looks behind the cursor: the lease a use already made holds
// until its release at the last replay. Step G W M X N: G, W and M are held
// together and released before X; N after.
TEST(PredictorTest, LeaseHeldAtFollowsALeaseTakenBeforeTheCursor) {
  const AccessEvent g = Fwd(10), w = Bwd(11), m = Bwd(12), x = Fwd(13),
                    n = Fwd(14);
  Predictor p;
  p.BeginStep();
  std::vector<PredictedUse> group;
  for (const AccessEvent& e : {g, w, m}) group.push_back(p.Observe(e));
  for (const PredictedUse& use : group) p.ObserveRelease(use);
  p.ObserveRelease(p.Observe(x));
  p.ObserveRelease(p.Observe(n));
  p.BeginStep();  // positions: G 0, W 1, M 2, X 3, N 4
  EXPECT_TRUE(p.LeaseHeldAt(TensorId{11}, 0)) << "no use of W yet";
  const PredictedUse g_use = p.Observe(g);
  const PredictedUse w_use = p.Observe(w);
  const PredictedUse m_use = p.Observe(m);       // cursor at X
  EXPECT_FALSE(p.LeaseHeldAt(TensorId{11}, 0));  // released before X
  EXPECT_FALSE(p.LeaseHeldAt(TensorId{12}, 1));  // and before N
  EXPECT_TRUE(p.LeaseHeldAt(TensorId{14}, 0)) << "N's use is ahead";
  EXPECT_TRUE(p.LeaseHeldAt(TensorId{99}, 0));
  for (const PredictedUse& use : {g_use, m_use}) p.ObserveRelease(use);
  p.ObserveRelease(p.Observe(x));
  p.ObserveRelease(w_use);  // this replay holds W until N's acquire
  p.ObserveRelease(p.Observe(n));
  p.BeginStep();
  for (const AccessEvent& e : {g, w, m}) p.Observe(e);  // held
  EXPECT_TRUE(p.LeaseHeldAt(TensorId{11}, 0)) << "held at X now";
  EXPECT_FALSE(p.LeaseHeldAt(TensorId{11}, 1)) << "but not at N";
  EXPECT_FALSE(p.LeaseHeldAt(TensorId{12}, 0));
}

TEST(PredictorTest, NextUseWrapsIntoTheFollowingShape) {
  Predictor p;
  const std::vector<AccessEvent> a = {Fwd(1), Fwd(2)};
  const std::vector<AccessEvent> b = {Fwd(3), Fwd(4), Fwd(5)};
  RunStep(p, a);
  RunStep(p, b);
  RunStep(p, a);
  RunStep(p, b);
  p.BeginStep();  // a, then b follows
  EXPECT_EQ(p.NextUse(TensorId{5}), 4u);
  p.Observe(Fwd(1));
  EXPECT_EQ(p.NextUse(TensorId{1}), 4u);  // 1 left in a + 3 in b + 0
  EXPECT_EQ(p.NextUse(TensorId{4}), 2u);
}

TEST(PredictorTest, DetectsRepetitionWithoutExplicitSteps) {
  Predictor p;
  const std::vector<AccessEvent>& t = Train();
  for (const AccessEvent& e : t) p.Observe(e);
  for (size_t i = 0; i < 3; ++i) p.Observe(t[i]);
  EXPECT_FALSE(p.has_prediction());
  p.Observe(t[3]);  // the first 4 events repeated: the cycle is 6 long
  ASSERT_TRUE(p.has_prediction());
  EXPECT_EQ(p.stats().steps, 1u);
  EXPECT_EQ(p.Upcoming(3), (std::vector<AccessEvent>{Bwd(2), Bwd(1), Fwd(1)}));
  p.Observe(t[4]);
  p.Observe(t[5]);
  EXPECT_EQ(p.stats().hits, 2u);
  for (const AccessEvent& e : t) p.Observe(e);
  EXPECT_EQ(p.stats().steps, 2u);  // the boundary is seen at its first event
  EXPECT_EQ(p.stats().hits, 8u);
  // Then a skipped layer mid-cycle and a skipped first layer.
  for (const AccessEvent& e : t) {
    if (!(e == Fwd(2))) p.Observe(e);
  }
  for (size_t i = 1; i < t.size(); ++i) p.Observe(t[i]);
  for (const AccessEvent& e : t) p.Observe(e);
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.steps, 5u);
  EXPECT_EQ(s.resyncs, 2u);
  EXPECT_EQ(s.hits, 8u + 4u + 4u + 6u);
  EXPECT_EQ(s.misses, 10u);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(s.traces_recorded, 1u);
}

// The bench's dynamic case: 16 layers, one layer (forward and backward)
// skipped at random every step. Two resyncs per step at most, no misses after
// the first step, no re-record.
TEST(PredictorTest, RandomSkippedLayerEachStepNeverReRecords) {
  std::mt19937 rng(7);
  constexpr int kLayers = 16;
  Predictor p;
  for (int step = 0; step < 50; ++step) {
    const int skipped = step == 0 ? 0 : 1 + static_cast<int>(rng() % kLayers);
    p.BeginStep();
    for (int i = 1; i <= kLayers; ++i) {
      if (i != skipped) p.Observe(Fwd(i));
    }
    for (int i = kLayers; i >= 1; --i) {
      if (i != skipped) p.Observe(Bwd(i));
    }
    p.EndStep();
  }
  const PredictorStats& s = p.stats();
  EXPECT_EQ(s.misses, 2u * kLayers);
  EXPECT_LE(s.resyncs, 2u * 49);
  EXPECT_EQ(s.hits, 49u * (2 * kLayers - 2) - s.resyncs);
  EXPECT_EQ(s.rerecords, 0u);
  EXPECT_EQ(s.traces_recorded, 1u);
}

// Random perturbations of a layered cycle (skips, substitutions, unknown
// tensors, other shapes), with and without explicit steps: counters add up,
// and NextUse agrees with the first occurrence in Upcoming (what Belady and
// prefetch will rely on).
TEST(PredictorTest, RandomizedNextUseAgreesWithUpcoming) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    PredictorOptions options;
    options.max_traces = 1 + rng() % 4;
    options.resync_window_events = 1 + rng() % 16;
    Predictor p(options);
    const bool explicit_steps = seed % 2 == 0;
    uint64_t observed = 0;
    for (int step = 0; step < 40; ++step) {
      const int layers = 3 + static_cast<int>(rng() % 3);
      std::vector<AccessEvent> events;
      for (int i = 1; i <= layers; ++i) events.push_back(Fwd(i));
      for (int i = layers; i >= 1; --i) events.push_back(Bwd(i));
      if (explicit_steps) p.BeginStep();
      for (const AccessEvent& e : events) {
        const uint32_t dice = rng() % 20;
        if (dice == 0) continue;  // skipped
        p.Observe(dice == 1 ? Fwd(100 + rng() % 5) : e);
        ++observed;
        const std::vector<AccessEvent> upcoming = p.Upcoming(200);
        ASSERT_EQ(upcoming.size(), p.has_prediction() ? 200u : 0u);
        for (uint64_t id = 1; id <= 6; ++id) {
          std::optional<uint64_t> expected;
          for (size_t k = 0; k < upcoming.size(); ++k) {
            if (upcoming[k].id == TensorId{id}) {
              expected = k;
              break;
            }
          }
          std::optional<uint64_t> next_use = p.NextUse(TensorId{id});
          if (expected.has_value()) {
            ASSERT_EQ(next_use, expected) << "seed " << seed << " id " << id;
          } else if (next_use.has_value()) {
            ASSERT_GE(*next_use, 200u) << "seed " << seed << " id " << id;
          }
        }
      }
      if (explicit_steps) p.EndStep();
    }
    const PredictorStats& s = p.stats();
    EXPECT_EQ(s.events, observed);
    EXPECT_EQ(s.hits + s.resyncs + s.misses, observed);
    EXPECT_LE(p.trace_count(), options.max_traces);
  }
}

// The times of the last replay predict the next: a step observed at 0, 1 and
// 3 s whose successor starts at 10 s predicts, after its first event, the
// next two accesses 1 and 3 s away and the next step's first 10 s away.
TEST(PredictorTest, UpcomingSecondsFollowTheLastReplaysTimes) {
  Predictor p;
  const std::vector<AccessEvent> step = {Fwd(1), Fwd(2), Fwd(3)};
  const double times[] = {0, 1, 3};
  p.BeginStep();
  for (size_t i = 0; i < step.size(); ++i) p.Observe(step[i], times[i]);
  p.EndStep();
  p.BeginStep();
  p.Observe(step[0], 10);
  EXPECT_EQ(p.Upcoming(3), (std::vector<AccessEvent>{Fwd(2), Fwd(3), Fwd(1)}));
  EXPECT_EQ(p.UpcomingSeconds(3), (std::vector<double>{1, 3, 10}));
  // This step runs faster: its times replace the trace's as they come.
  p.Observe(step[1], 10.5);
  p.Observe(step[2], 11);
  p.EndStep();
  p.BeginStep();
  p.Observe(step[0], 12);
  EXPECT_EQ(p.UpcomingSeconds(2), (std::vector<double>{0.5, 1}));
}

// Skipping past the end of the trace chain finds nothing, at once.
TEST(PredictorTest, NextUseSkippingBeyondEveryTraceIsNone) {
  Predictor p;
  RunStep(p, Train());
  p.BeginStep();
  p.Observe(Train()[0]);
  EXPECT_EQ(p.NextUse(TensorId{2}, 0), 0u);
  EXPECT_EQ(p.NextUse(TensorId{2}, 1), 3u);
  EXPECT_EQ(p.NextUse(TensorId{2}, 4), 6u);  // next step's forward
  EXPECT_EQ(p.NextUse(TensorId{2}, ~uint64_t{0}), std::nullopt);
}

// Without a clock every access is predicted now.
TEST(PredictorTest, UpcomingSecondsWithoutTimesAreZero) {
  Predictor p;
  RunStep(p, Train());
  p.BeginStep();
  p.Observe(Train()[0]);
  EXPECT_EQ(p.UpcomingSeconds(7), std::vector<double>(7, 0));
}

}  // namespace
}  // namespace strata
