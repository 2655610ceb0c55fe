// break_race_test.cc: races the store must survive, forced through the fault
// wrappers' gates (tiers/fault/gate.h) rather than ordered by sleeps, each
// asserting that the interleaving it is about happened
// (tests/util/break_test_util.h says what the break tests check): a failing
// prefetch against the acquire waiting for it, lifecycle operations against
// queued and in-flight prefetches, an eviction's write-back against a
// prefetch reading the copy it writes back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "strata/store.h"
#include "tests/util/break_test_util.h"
#include "tests/util/race_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using ::strata::testing::WaitUntil;
using Code = absl::StatusCode;
using State = Residency::State;

constexpr uint64_t kSize = kMiB + 3;

State StateOn(BreakEnv& env, TensorId id, Tier tier) {
  return env.store->GetResidency(id)->tiers[static_cast<int>(tier)];
}

// A tensor of kSize bytes holding Pattern(kSize, seed), on NVMe only when
// `nvme_only` (its loads then read NVMe), else in host memory too.
TensorId Written(BreakEnv& env, uint64_t seed, bool nvme_only) {
  const TensorId id = env.Make(kSize);
  EXPECT_TRUE(env.store->Write(id, Pattern(kSize, seed).data(), kSize).ok());
  if (nvme_only) {
    EXPECT_TRUE(env.store->Evict(id, Tier::kNvme).ok());
  }
  return id;
}

// A prefetch whose NVMe read fails must wake the acquire that waits for the
// copy it was loading (a lost wake-up hangs). The read is held at the gate
// until the acquire is provably waiting for it: the acquire counts the
// prefetch late just before it waits, under the store's lock.
TEST(BreakRaceTest, FailingPrefetchWakesWaitingAcquire) {
  RunIsolated(60, [] {
    BreakEnv env;
    const TensorId id = Written(env, 1, /*nvme_only=*/true);
    Gate& gate = env.io->gate();
    gate.Arm(GateOp::kNvmeRead);
    ASSERT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
    ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead));
    EXPECT_EQ(StateOn(env, id, Tier::kDevice), State::kLoading);
    env.io->set_spec({.nth = 1, .ops = FaultOps::kReads});  // the held one
    absl::StatusOr<Lease> lease = absl::UnknownError("not acquired");
    std::thread reader(
        [&] { lease = env.store->Acquire(id, Tier::kDevice, Access::kRead); });
    ASSERT_TRUE(
        WaitUntil([&] { return env.store->GetStats().prefetch.late == 1; }));
    gate.Release(GateOp::kNvmeRead);
    reader.join();
    // The acquire woke to an absent copy and loaded it itself.
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(MatchesPattern(lease->data(), kSize, 1));
    ASSERT_TRUE(lease->Release().ok());
    const PrefetchStats p = env.store->GetStats().prefetch;
    EXPECT_EQ(p.failed, 1u);
    EXPECT_EQ(p.late, 1u);
    EXPECT_EQ(env.io->injected(), 1u);
    EXPECT_EQ(gate.held(GateOp::kNvmeRead), 1u);
    ASSERT_TRUE(env.store->Destroy(id).ok());
    env.ExpectNoSpaceHeld();
  });
}

// What a lifecycle test does to a tensor before destroying it.
enum class LifecycleOp { kDestroy, kEvictThenDestroy, kDiscardThenDestroy };

const char* OpName(LifecycleOp op) {
  switch (op) {
    case LifecycleOp::kDestroy:
      return "destroy";
    case LifecycleOp::kEvictThenDestroy:
      return "evict, destroy";
    default:
      return "discard, destroy";
  }
}

// Runs `op` on `id` (holding Pattern(kSize, seed)) and checks its effect.
void RunLifecycleOp(BreakEnv& env, TensorId id, uint64_t seed, LifecycleOp op) {
  if (op == LifecycleOp::kEvictThenDestroy) {
    EXPECT_TRUE(env.store->Evict(id, Tier::kNvme).ok());
    EXPECT_TRUE(env.Holds(id, kSize, seed));
  } else if (op == LifecycleOp::kDiscardThenDestroy) {
    EXPECT_TRUE(env.store->Discard(id).ok());
    EXPECT_EQ(
        env.store->Acquire(id, Tier::kDevice, Access::kRead).status().code(),
        Code::kFailedPrecondition);
  }
  EXPECT_TRUE(env.store->Destroy(id).ok());
}

constexpr LifecycleOp kLifecycleOps[] = {LifecycleOp::kDestroy,
                                         LifecycleOp::kEvictThenDestroy,
                                         LifecycleOp::kDiscardThenDestroy};

// Destroy, Evict and Discard of a tensor whose prefetches are queued but not
// started complete at once and leave nothing for those prefetches to fill.
// The one prefetch thread (the default) is held on another tensor's load,
// so the tensor's prefetches provably wait in the queue while the operation
// runs; released, they find the tensor gone.
TEST(BreakRaceTest, LifecycleOpsWhileItsPrefetchesAreQueued) {
  RunIsolated(120, [] {
    BreakEnv env;
    const TensorId blocker = Written(env, 100, /*nvme_only=*/true);
    Gate& gate = env.io->gate();
    uint64_t seed = 0;
    for (LifecycleOp op : kLifecycleOps) {
      SCOPED_TRACE(OpName(op));
      const TensorId id = Written(env, ++seed, /*nvme_only=*/false);
      ASSERT_TRUE(env.store->Evict(blocker, Tier::kNvme).ok());
      gate.Arm(GateOp::kNvmeRead);
      ASSERT_TRUE(env.store->Prefetch(blocker, Tier::kHost).ok());
      ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead));
      ASSERT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
      ASSERT_TRUE(env.store->Prefetch(id, Tier::kHost).ok());  // already there
      EXPECT_EQ(StateOn(env, id, Tier::kDevice), State::kAbsent);
      RunLifecycleOp(env, id, seed, op);
      EXPECT_EQ(gate.parked(GateOp::kNvmeRead), 1)
          << "the prefetch thread was not held: the race did not happen";
      gate.Release(GateOp::kNvmeRead);
    }
    // Destroy waits for the blocker's last load; the prefetches queued
    // behind it found their tensors gone and filled nothing.
    ASSERT_TRUE(env.store->Destroy(blocker).ok());
    EXPECT_EQ(gate.held(GateOp::kNvmeRead), 3u);
    EXPECT_EQ(env.store->GetStats().prefetch.failed, 0u);
    env.ExpectNoSpaceHeld();
  });
}

// Destroy, Evict and Discard issued while a prefetch of the same tensor is
// loading it (its NVMe read held at the gate) wait for the load to end, then
// do their work: none returns while the load is held. The gate makes the
// load be in flight when the operation is issued; it cannot make the
// operation reach its wait before the load is let go, because the store
// shows nothing while these three wait (Evict's wait is forced below, with
// its write-back held). Had one not waited, it would have returned with the
// load still held, which the test checks.
TEST(BreakRaceTest, LifecycleOpsIssuedWhileAPrefetchIsInFlight) {
  RunIsolated(120, [] {
    BreakEnv env;
    Gate& gate = env.io->gate();
    uint64_t seed = 10;
    for (LifecycleOp op : kLifecycleOps) {
      SCOPED_TRACE(OpName(op));
      const TensorId id = Written(env, ++seed, /*nvme_only=*/true);
      gate.Arm(GateOp::kNvmeRead);
      ASSERT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
      ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead));
      EXPECT_EQ(StateOn(env, id, Tier::kDevice), State::kLoading);
      std::atomic<bool> issuing{false};
      std::thread releaser([&] {
        while (!issuing) std::this_thread::yield();
        gate.Release(GateOp::kNvmeRead);
      });
      issuing = true;
      RunLifecycleOp(env, id, seed, op);
      EXPECT_EQ(gate.parked(GateOp::kNvmeRead), 0)
          << "returned while the prefetch's load was still held";
      releaser.join();
    }
    EXPECT_EQ(gate.held(GateOp::kNvmeRead), 3u);
    const PrefetchStats p = env.store->GetStats().prefetch;
    EXPECT_EQ(p.failed, 0u);
    EXPECT_EQ(p.issued, 3u);
    env.ExpectNoSpaceHeld();
  });
}

// An Evict writing a dirty host copy back to NVMe while a prefetch copies
// that same host copy to the device: both transfers are held in flight at
// once (the write-back at the NVMe write, the prefetch at its H2D copy), so
// neither can have finished before the other started. The eviction then
// waits for the prefetch and drops the copy it brought; nothing is lost,
// the prefetch counts as wasted.
TEST(BreakRaceTest, EvictWriteBackAgainstAPrefetchOfTheSameCopy) {
  RunIsolated(60, [] {
    BreakEnv env;
    const TensorId id = Written(env, 50, /*nvme_only=*/false);  // host dirty
    ASSERT_EQ(StateOn(env, id, Tier::kNvme), State::kAbsent);
    Gate& nvme = env.io->gate();
    Gate& link = env.device->gate();
    nvme.Arm(GateOp::kNvmeWrite);
    link.Arm(GateOp::kH2D);
    absl::Status evicted = absl::UnknownError("not run");
    std::thread evictor([&] { evicted = env.store->Evict(id, Tier::kNvme); });
    ASSERT_TRUE(nvme.WaitUntilHeld(GateOp::kNvmeWrite));
    ASSERT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
    ASSERT_TRUE(link.WaitUntilHeld(GateOp::kH2D));
    EXPECT_EQ(StateOn(env, id, Tier::kNvme), State::kLoading);
    EXPECT_EQ(StateOn(env, id, Tier::kDevice), State::kLoading);
    EXPECT_EQ(StateOn(env, id, Tier::kHost), State::kDirty);  // the source
    link.Release(GateOp::kH2D);
    nvme.Release(GateOp::kNvmeWrite);
    evictor.join();
    ASSERT_TRUE(evicted.ok()) << evicted;
    EXPECT_EQ(StateOn(env, id, Tier::kDevice), State::kAbsent);
    EXPECT_EQ(StateOn(env, id, Tier::kHost), State::kAbsent);
    EXPECT_EQ(StateOn(env, id, Tier::kNvme), State::kClean);
    EXPECT_EQ(env.store->GetStats().prefetch.wasted, 1u);
    EXPECT_TRUE(env.Holds(id, kSize, 50));
    EXPECT_EQ(nvme.held(GateOp::kNvmeWrite), 1u);
    EXPECT_EQ(link.held(GateOp::kH2D), 1u);
    ASSERT_TRUE(env.store->Destroy(id).ok());
    env.ExpectNoSpaceHeld();
  });
}

}  // namespace
}  // namespace strata
