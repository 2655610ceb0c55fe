// store_close_stress_test.cc: stress of the store's prefetch continuations,
// which run on the Mover's transfer threads (StoreCore::ContinueHere), while
// the store is used from several threads, with and without injected NVMe
// faults, and closed under them with prefetches and write-backs in flight.
//
// Every test asserts outcomes that hold for any interleaving (bytes, status
// codes); each runs in a child process with a deadline (RunIsolated), so a
// hang or crash fails the test instead of stalling the run. Nothing sleeps.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/break_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;

// --- The store: prefetch continuations on the transfer threads.

constexpr uint64_t kTensor = 64 * 1024;

struct StoreShape {
  bool faults;  // EIO on some NVMe reads (no retries: they reach the store)
  int prefetch_threads;
};

// A store of `shape` with room for 4 tensors on the device and 8 on the host,
// whose NVMe reads fail with EIO at `rate` (seeded) when shape.faults.
std::unique_ptr<testing::BreakEnv> OpenEnv(const StoreShape& shape,
                                           uint64_t seed, double rate) {
  auto env = std::make_unique<testing::BreakEnv>(
      4 * kTensor, 8 * kTensor, 32 * 1024 * 1024, [&](StoreOptions& o) {
        o.scheduler.prefetch_threads = shape.prefetch_threads;
        o.nvme.block_size_bytes = kTensor;
      });
  if (env->store != nullptr && shape.faults) {
    env->io->set_spec({.seed = seed,
                       .rate = rate,
                       .ops = FaultOps::kReads,
                       .kind = FaultKind::kEio});
  }
  return env;
}

// DriveAndClose's threads, and the tensors each owns.
constexpr int kThreads = 3;
constexpr int kPerThread = 8;

// What DriveAndClose's threads share: the store, thread t's tensors ids[t]
// and the seed of the contents each must hold, and the counts of bad outcomes
// and of acquires that succeeded.
struct Drive {
  Store& store;
  bool faults;
  std::vector<std::vector<TensorId>> ids =
      std::vector<std::vector<TensorId>>(kThreads);
  std::vector<std::vector<uint64_t>> seeds =
      std::vector<std::vector<uint64_t>>(kThreads);
  std::atomic<int> bad{0};
  std::atomic<int> acquired{0};

  // Thread t's acquire of its tensor i in `pass`: it must read the latest
  // contents; every other pass writes new ones into half of them.
  void UseTensor(int t, int i, int pass);
  // Thread t's `passes` passes over its tensors (thread 0 marks the steps).
  void Passes(int t, int passes);
  // Runs Passes(t, passes) on a thread of its own for each t, and joins them.
  void RunThreads(int passes);
};

void Drive::UseTensor(int t, int i, int pass) {
  const bool write = pass % 2 == 1 && i % 2 == t % 2;
  const Tier tier = i % 3 == 0 ? Tier::kHost : Tier::kDevice;
  auto lease =
      store.Acquire(ids[t][i], tier, write ? Access::kWrite : Access::kRead);
  if (!lease.ok()) {
    // Only an injected read error may stop an acquire.
    if (!faults || !absl::IsUnavailable(lease.status())) {
      ++bad;
      ADD_FAILURE() << "t=" << t << " i=" << i << ": " << lease.status();
    }
    return;
  }
  ++acquired;
  if (!MatchesPattern(lease->data(), kTensor, seeds[t][i])) {
    ++bad;
    ADD_FAILURE() << "t=" << t << " i=" << i << " pass=" << pass
                  << ": wrong contents on " << TierName(tier);
  }
  if (write) {
    const uint64_t s = seeds[t][i] + 1000000;
    FillPattern(lease->data(), kTensor, s);
    seeds[t][i] = s;
  }
  const absl::Status r = lease->Release();
  if (!r.ok()) {
    ++bad;
    ADD_FAILURE() << "release t=" << t << " i=" << i << ": " << r;
  }
}

void Drive::Passes(int t, int passes) {
  for (int pass = 0; pass < passes; ++pass) {
    if (t == 0) store.BeginStep();
    for (int i = 0; i < kPerThread; ++i) UseTensor(t, i, pass);
    if (t == 0) store.EndStep();
  }
}

void Drive::RunThreads(int passes) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, passes] { Passes(t, passes); });
  }
  for (std::thread& th : threads) th.join();
}

// Gives each thread's tensors their first contents, homed on NVMe (ASSERTs).
void MakeTensors(testing::BreakEnv& env, uint64_t seed, Drive& drive) {
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const uint64_t s = seed * 1000 + t * 100 + i;
      TensorId id = env.Make(kTensor);
      ASSERT_TRUE(
          drive.store.Write(id, Pattern(kTensor, s).data(), kTensor).ok());
      ASSERT_TRUE(drive.store.Evict(id, Tier::kNvme).ok());
      drive.ids[t].push_back(id);
      drive.seeds[t].push_back(s);
    }
  }
}

// EXPECTs every tensor to read back its latest contents.
void ExpectAllHeld(testing::BreakEnv& env, const Drive& drive) {
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      EXPECT_TRUE(env.Holds(drive.ids[t][i], kTensor, drive.seeds[t][i]))
          << "t=" << t << " i=" << i << " lost its contents";
    }
  }
}

// Several threads, each with its own NVMe-homed tensors, acquire them in a
// repeating order (steps) so the scheduler learns the trace and prefetches
// onto a device and host too small for all of them; every other pass writes
// new contents (dirty copies that eviction writes back). Every acquire that
// succeeds reads the latest contents; with faults off, every tensor reads
// back right at the end; then a last step starts prefetches and the store is
// destroyed at once, with them (and write-backs) in flight. Run in a child
// with a deadline: a hang or crash fails the test.
void DriveAndClose(const StoreShape& shape, uint64_t seed) {
  std::unique_ptr<testing::BreakEnv> env = OpenEnv(shape, seed, 0.08);
  ASSERT_NE(env->store, nullptr);
  Store& store = *env->store;
  Drive drive{.store = store, .faults = shape.faults};
  MakeTensors(*env, seed, drive);
  if (::testing::Test::HasFatalFailure()) return;
  drive.RunThreads(8);
  EXPECT_EQ(drive.bad.load(), 0);
  EXPECT_GT(drive.acquired.load(), 0);
  const Stats stats = store.GetStats();
  EXPECT_GT(stats.prefetch.issued, 0u) << "the scheduler never prefetched";
  env->NoFaults();
  ExpectAllHeld(*env, drive);
  if (shape.faults) {
    env->io->set_spec({.seed = seed + 1,
                       .rate = 0.2,
                       .ops = FaultOps::kReads,
                       .kind = FaultKind::kEio});
  }
  // One more pass in each thread (prefetches start), then close at once.
  drive.RunThreads(1);
  store.BeginStep();
  for (int i = 0; i < kPerThread; ++i) {
    (void)store.Prefetch(drive.ids[i % kThreads][i], Tier::kDevice);
    (void)store.Prefetch(drive.ids[(i + 1) % kThreads][i], Tier::kHost);
  }
  env->store.reset();  // with prefetches and write-backs in flight
}

class StoreCloseStressTest : public ::testing::TestWithParam<StoreShape> {};

TEST_P(StoreCloseStressTest, PrefetchingStoreKeepsContentsAndClosesCleanly) {
  const StoreShape shape = GetParam();
  RunIsolated(60, [shape] {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      DriveAndClose(shape, seed);
      if (::testing::Test::HasFailure()) return;
    }
  });
}

// Leases outlive the store: threads hold leases (read and write) while the
// store is destroyed with prefetches in flight, then release them on their
// own threads. Each release returns OK or FailedPrecondition (the store is
// closed), and nothing crashes or hangs (the last owner of the store's state
// may then be a releasing thread).
TEST_P(StoreCloseStressTest, LeasesReleasedAfterTheStoreIsDestroyed) {
  const StoreShape shape = GetParam();
  RunIsolated(60, [shape] {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      constexpr int kCount = 12;
      std::unique_ptr<testing::BreakEnv> env = OpenEnv(shape, seed, 0.1);
      ASSERT_NE(env->store, nullptr);
      std::vector<TensorId> ids;
      for (int i = 0; i < kCount; ++i) {
        TensorId id = env->Make(kTensor);
        ASSERT_TRUE(
            env->store
                ->Write(id, Pattern(kTensor, seed * 100 + i).data(), kTensor)
                .ok());
        ASSERT_TRUE(env->store->Evict(id, Tier::kNvme).ok());
        ids.push_back(id);
      }
      // Teach the scheduler the order, so the last pass prefetches.
      for (int pass = 0; pass < 3; ++pass) {
        env->store->BeginStep();
        for (int i = 0; i < kCount; ++i) {
          auto lease =
              env->store->Acquire(ids[i], Tier::kDevice, Access::kRead);
          if (lease.ok()) {
            EXPECT_TRUE(MatchesPattern(lease->data(), kTensor, seed * 100 + i));
          } else {
            EXPECT_TRUE(shape.faults && absl::IsUnavailable(lease.status()))
                << lease.status();
          }
        }
        env->store->EndStep();
      }
      std::latch ready(3);
      std::atomic<bool> closed{false};
      std::vector<std::thread> holders;
      for (int t = 0; t < 3; ++t) {
        holders.emplace_back([&, t] {
          std::vector<Lease> held;
          for (int i = t; i < kCount; i += 3) {
            const Access a = i % 2 == 0 ? Access::kRead : Access::kWrite;
            const Tier tier = i % 3 == 0 ? Tier::kHost : Tier::kDevice;
            auto lease = env->store->Acquire(ids[i], tier, a);
            if (lease.ok()) {
              if (held.size() < 1) held.push_back(std::move(*lease));
            } else if (!(shape.faults && absl::IsUnavailable(lease.status())) &&
                       !absl::IsResourceExhausted(lease.status())) {
              ADD_FAILURE() << lease.status();
            }
          }
          ready.count_down();
          closed.wait(false);
          for (Lease& l : held) {
            const absl::Status r = l.Release();
            EXPECT_TRUE(r.ok() || absl::IsFailedPrecondition(r)) << r;
          }
        });
      }
      ready.wait();
      env->store->BeginStep();
      for (int i = 0; i < kCount; ++i) {
        (void)env->store->Prefetch(ids[i], Tier::kDevice);
      }
      env->store.reset();  // prefetches in flight, leases still held
      closed = true;
      closed.notify_all();
      for (std::thread& th : holders) th.join();
      if (::testing::Test::HasFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, StoreCloseStressTest,
    ::testing::Values(StoreShape{false, 0}, StoreShape{false, 3},
                      StoreShape{true, 0}, StoreShape{true, 2}),
    [](const ::testing::TestParamInfo<StoreShape>& info) {
      return std::string(info.param.faults ? "Faults" : "NoFaults") + "Jobs" +
             std::to_string(info.param.prefetch_threads);
    });

}  // namespace
}  // namespace strata
