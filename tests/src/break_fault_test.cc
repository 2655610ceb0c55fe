// break_fault_test.cc: injected faults against the rule that no data is ever
// lost to an I/O error (tests/util/break_test_util.h says what the break tests
// check): failed writes to device-home tensors and through the device, every
// transfer failing at once, a device-fault storm from several threads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "strata/store.h"
#include "tests/util/break_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::Consistent;
using ::strata::testing::FillPattern;
using ::strata::testing::FillTagged;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using Code = absl::StatusCode;

// Regression (was data loss): PrepareExclusive decides what to do with a copy
// by calling rec.dirty(tier) -- but AcquireExclusive has already set that
// copy's state to kLoading, and dirty() is false for any copy that is not
// kValid. So for a Write through a copy that was already valid:
//  * the "save the only copy to the home tier first" step for a dirty device
//    copy never runs, and
//  * when the caller's H2D copy fails, the `was_valid && rec.dirty(tier)`
//    test is false and the copy is abandoned (AbandonCopy), even when it was
//    the tensor's ONLY copy.
// For a device-home tensor the home copy is marked absent while
// has_contents stays true: the Write returns Internal, and from then on every
// Read/Acquire fails with "tensor 't' has contents but no valid copy (store
// bug)" -- the data is gone. (Had the copy been kept, it would be torn: the
// failed H2D copy already wrote half the bytes over it, so "keep it" is also
// wrong for the device; the device-home case needs a staging copy or a
// copy-then-swap.) Expected: Write fails, the previous contents read back.
TEST(BreakFaultTest, FailedWholeWriteToDeviceHomeTensorKeepsIt) {
  RunIsolated(60, [] {
    BreakEnv env;
    constexpr uint64_t kSize = 300 * 1024 + 7;
    TensorId id = env.Make(kSize, Tier::kDevice);
    ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 1).data(), kSize).ok());
    env.device->set_spec(
        {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
    absl::Status s = env.store->Write(id, Pattern(kSize, 2).data(), kSize);
    EXPECT_FALSE(s.ok());
    env.NoFaults();
    EXPECT_TRUE(env.Holds(id, kSize, 1))
        << "failed Write lost/tore the device-home tensor (Write said: " << s
        << ")";
  });
}

// Regression: same as above for a partial Write (the kWrite path).
TEST(BreakFaultTest, FailedPartialWriteToDeviceHomeTensorKeepsIt) {
  RunIsolated(60, [] {
    BreakEnv env;
    constexpr uint64_t kSize = 300 * 1024 + 7;
    TensorId id = env.Make(kSize, Tier::kDevice);
    ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 1).data(), kSize).ok());
    env.device->set_spec(
        {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
    auto part = Pattern(1000, 2);
    absl::Status s = env.store->Write(id, part.data(), 1000, 4096);
    EXPECT_FALSE(s.ok());
    env.NoFaults();
    EXPECT_TRUE(env.Holds(id, kSize, 1))
        << "failed partial Write lost/tore the device-home tensor (Write "
           "said: "
        << s << ")";
  });
}

// Regression (was data loss), same root cause: an NVMe-home tensor whose only
// copy is a dirty device copy, written with Write() while the host tier is full
// of leases (so the Write goes through the device). The "save to home first"
// step is skipped (dirty() sees kLoading), the H2D copy of the caller's bytes
// fails, and the device copy -- the only copy -- is abandoned. Expected: the
// Write fails and the tensor still reads back as before (pattern 2).
TEST(BreakFaultTest, FailedWriteThroughDeviceKeepsOnlyDirtyCopy) {
  struct Scenario {
    const char* what;
    bool whole;
    FaultSpec device;
    FaultSpec io;
  };
  const Scenario scenarios[] = {
      {"whole write, H2D fails",
       true,
       {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy},
       {}},
      {"partial write, H2D fails",
       false,
       {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy},
       {}},
      {"partial write, D2H fails",
       false,
       {.nth = 1, .ops = FaultOps::kD2H, .kind = FaultKind::kTornCopy},
       {}},
      {"partial write, NVMe write fails",
       false,
       {},
       {.nth = 1, .ops = FaultOps::kWrites}},
  };
  for (const Scenario& sc : scenarios) {
    SCOPED_TRACE(sc.what);
    RunIsolated(60, [&sc] {
      BreakEnv env(2 * kMiB, kMiB, 16 * kMiB);
      constexpr uint64_t kSize = 200 * 1024 + 3;
      TensorId id = env.Make(kSize);
      ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 1).data(), kSize).ok());
      {
        // Make the device copy the only (dirty) one.
        auto l = env.store->Acquire(id, Tier::kDevice, Access::kWrite);
        ASSERT_TRUE(l.ok());
        FillPattern(l->data(), kSize, 2);
      }
      // Fill the host tier with leases so Write must go through the device.
      TensorId filler = env.Make(kMiB);
      auto hold = env.store->Acquire(filler, Tier::kHost, Access::kOverwrite);
      ASSERT_TRUE(hold.ok()) << hold.status();
      env.device->set_spec(sc.device);
      env.io->set_spec(sc.io);
      absl::Status w =
          sc.whole ? env.store->Write(id, Pattern(kSize, 3).data(), kSize)
                   : env.store->Write(id, Pattern(500, 4).data(), 500, 10);
      env.NoFaults();
      std::vector<std::byte> out(kSize);
      absl::Status r = env.store->Read(id, out.data(), kSize);
      ASSERT_TRUE(r.ok()) << "after Write said " << w << ", Read says " << r;
      if (w.ok()) {
        // The fault did not hit this path: the write must be visible.
        std::vector<std::byte> want = Pattern(kSize, 2);
        if (sc.whole) {
          want = Pattern(kSize, 3);
        } else {
          auto p = Pattern(500, 4);
          std::copy(p.begin(), p.end(), want.begin() + 10);
        }
        EXPECT_EQ(out, want);
      } else {
        EXPECT_TRUE(MatchesPattern(out.data(), kSize, 2))
            << "failed Write (" << w << ") changed the contents";
      }
      hold->Release().IgnoreError();
      ASSERT_TRUE(env.store->Destroy(id).ok());
      ASSERT_TRUE(env.store->Destroy(filler).ok());
      env.ExpectNoSpaceHeld();
    });
  }
}

// A tensor of EverythingFailsThenRecovers and what it holds.
struct Tracked {
  TensorId id;
  uint64_t size;
  Tier home;
  uint64_t seed;  // 0: no contents
};

// Every device copy and every block I/O fails; the block I/O with EIO, a
// short write or a bit flip as `round` says.
void FailEverything(BreakEnv& env, int round) {
  env.device->set_spec({.seed = 3, .rate = 1.0, .kind = FaultKind::kTornCopy});
  env.io->set_spec({.seed = 3,
                    .rate = 1.0,
                    .kind = round == 1   ? FaultKind::kShortWrite
                            : round == 2 ? FaultKind::kBitFlip
                                         : FaultKind::kEio});
}

// What an operation may return while everything fails (Unavailable: the
// skipped device-home Write).
bool Allowed(const absl::Status& s) {
  static const std::set<Code> allowed = {
      Code::kOk,       Code::kInternal,          Code::kUnavailable,
      Code::kDataLoss, Code::kResourceExhausted, Code::kFailedPrecondition};
  return allowed.contains(s.code());
}

// Every lease `t`'s home allows, with faults on; write leases refill it.
void AcquireEveryWay(BreakEnv& env, Tracked& t) {
  for (Tier tier : {Tier::kDevice, Tier::kHost}) {
    if (static_cast<int>(tier) > static_cast<int>(t.home)) continue;
    for (Access acc : {Access::kRead, Access::kWrite, Access::kOverwrite}) {
      auto l = env.store->Acquire(t.id, tier, acc);
      EXPECT_TRUE(Allowed(l.status())) << l.status();
      if (!l.ok()) continue;
      if (acc != Access::kOverwrite) {
        EXPECT_TRUE(MatchesPattern(l->data(), t.size, t.seed))
            << TierName(tier) << " " << AccessName(acc);
      }
      if (acc != Access::kRead) {
        t.seed += 7;
        FillPattern(l->data(), t.size, t.seed);
      }
    }
    EXPECT_TRUE(env.store->Prefetch(t.id, tier).ok());
  }
}

// One round of reads, writes, leases, prefetches and evictions on `t` with
// every transfer failing.
void ExerciseUnderFaults(BreakEnv& env, Tracked& t, int round) {
  std::vector<std::byte> out(t.size);
  absl::Status r = env.store->Read(t.id, out.data(), t.size);
  EXPECT_TRUE(Allowed(r)) << r;
  if (r.ok()) {
    EXPECT_TRUE(MatchesPattern(out.data(), t.size, t.seed))
        << "read returned wrong data under faults";
  }
  const uint64_t seed = t.seed + 1;
  // Write() to a device-home tensor under H2D faults loses it (see
  // FailedWholeWriteToDeviceHomeTensorKeepsIt); leave that to those tests
  // so this one checks everything else.
  absl::Status w =
      t.home == Tier::kDevice
          ? absl::UnavailableError("skipped")
          : env.store->Write(t.id, Pattern(t.size, seed).data(), t.size);
  EXPECT_TRUE(Allowed(w)) << w;
  if (w.ok()) t.seed = seed;
  if (!w.ok()) {
    // A failed Write must leave the previous contents readable.
    env.NoFaults();
    EXPECT_TRUE(env.Holds(t.id, t.size, t.seed))
        << "failed Write (" << w << ") lost the previous contents";
    FailEverything(env, round);
  }
  AcquireEveryWay(env, t);
  for (Tier to : {Tier::kHost, Tier::kNvme}) {
    if (static_cast<int>(to) > static_cast<int>(t.home)) continue;
    absl::Status e = env.store->Evict(t.id, to);
    EXPECT_TRUE(Allowed(e)) << e;
  }
}

// Tensors of every home and size, their copies spread: some on NVMe only,
// some dirty on the device.
std::vector<Tracked> SpreadTensors(BreakEnv& env) {
  std::vector<Tracked> ts;
  uint64_t n = 0;
  for (Tier home : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
    for (uint64_t size : {uint64_t{1}, uint64_t{4097}, uint64_t{200000}}) {
      TensorId id = env.Make(size, home);
      const uint64_t seed = ++n;
      EXPECT_TRUE(env.store->Write(id, Pattern(size, seed).data(), size).ok());
      ts.push_back({id, size, home, seed});
    }
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].home == Tier::kNvme && i % 2 == 0) {
      EXPECT_TRUE(env.store->Evict(ts[i].id, Tier::kNvme).ok());
    }
    if (i % 3 == 1) {
      auto l = env.store->Acquire(ts[i].id, Tier::kDevice, Access::kWrite);
      EXPECT_TRUE(l.ok()) << l.status();
      if (!l.ok()) continue;
      ts[i].seed += 1000;
      FillPattern(l->data(), ts[i].size, ts[i].seed);
    }
  }
  return ts;
}

// Every device copy and every block I/O fails; every operation must fail
// cleanly (or succeed without I/O), nothing must leak, and once the faults
// stop every tensor reads back as its last successful write. Each round
// ends with the prefetches it queued settled (PausePrefetch: the running
// ones finish under faults, the queued ones are dropped), so the check
// without faults sees the store at rest.
TEST(BreakFaultTest, EverythingFailsThenRecovers) {
  RunIsolated(120, [] {
    BreakEnv env(kMiB, kMiB, 16 * kMiB);
    std::vector<Tracked> ts = SpreadTensors(env);
    ASSERT_FALSE(::testing::Test::HasFailure());
    for (int round = 0; round < 3; ++round) {
      FailEverything(env, round);
      for (Tracked& t : ts) {
        SCOPED_TRACE(::testing::Message()
                     << "tensor " << t.id.value << " home " << TierName(t.home)
                     << " round " << round);
        ExerciseUnderFaults(env, t, round);
      }
      env.store->PausePrefetch(true);  // returns once none moves bytes
      env.NoFaults();
      for (const Tracked& t : ts) {
        SCOPED_TRACE(::testing::Message()
                     << "tensor " << t.id.value << " home " << TierName(t.home)
                     << " round " << round);
        const absl::StatusOr<Residency> residency =
            env.store->GetResidency(t.id);
        ASSERT_TRUE(residency.ok()) << residency.status();
        for (Residency::State state : residency->tiers) {
          EXPECT_NE(state, Residency::State::kLoading) << "not settled";
          EXPECT_NE(state, Residency::State::kEvicting) << "not settled";
        }
        EXPECT_TRUE(env.Holds(t.id, t.size, t.seed)) << "data lost";
      }
      env.store->PausePrefetch(false);
    }
    EXPECT_GT(env.device->injected(), 0u);
    EXPECT_GT(env.io->injected(), 0u);
    EXPECT_EQ(env.store->GetStats().tiers[0].leased_bytes, 0u);
    EXPECT_EQ(env.store->GetStats().tiers[1].leased_bytes, 0u);
    for (const Tracked& t : ts) ASSERT_TRUE(env.store->Destroy(t.id).ok());
    env.ExpectNoSpaceHeld();
  });
}

// Device copy faults while several threads hammer one tensor that is larger
// than the host tier, so every Write and Read goes through the device. Reads
// must never see a torn tensor, and once faults stop the tensor must still be
// readable as a whole write. Regression (was a race, failing almost always)
// through the PrepareExclusive bug above: a failed H2D Write drops the only
// copy, and later operations report "has contents but no valid copy (store
// bug)" until some overwrite happens to succeed.
TEST(BreakFaultTest, DeviceFaultStormThroughDevice) {
  RunIsolated(120, [] {
    BreakEnv env(2 * kMiB, 256 * 1024, 16 * kMiB);
    constexpr uint64_t kSize = 300 * 1024 + 1;
    TensorId id = env.Make(kSize);
    std::vector<std::byte> init(kSize);
    FillTagged(init.data(), kSize, 1);
    ASSERT_TRUE(env.store->Write(id, init.data(), kSize).ok());
    env.device->set_spec(
        {.seed = 11, .rate = 0.2, .kind = FaultKind::kTornCopy});
    std::atomic<uint64_t> next_seed{2};
    std::atomic<int> torn{0};
    std::atomic<int> lost{0};  // ops that found no valid copy at all
    auto note = [&](const absl::Status& st) {
      if (absl::StrContains(st.message(), "no valid copy")) ++lost;
    };
    auto worker = [&](int index) {
      std::mt19937_64 rng(index);
      std::vector<std::byte> buf(kSize);
      for (int i = 0; i < 600; ++i) {
        switch (rng() % 4) {
          case 0:
            FillTagged(buf.data(), kSize, next_seed++);
            note(env.store->Write(id, buf.data(), kSize));
            break;
          case 1: {
            absl::Status st = env.store->Read(id, buf.data(), kSize);
            note(st);
            if (st.ok() && !Consistent(buf.data(), kSize)) ++torn;
            break;
          }
          case 2: {
            auto l = env.store->Acquire(id, Tier::kDevice, Access::kRead);
            note(l.status());
            if (l.ok() && !Consistent(l->data(), kSize)) ++torn;
            break;
          }
          default:
            note(env.store->Evict(id, Tier::kNvme));
            break;
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
    for (std::thread& t : threads) t.join();
    env.NoFaults();
    EXPECT_EQ(torn.load(), 0) << "reads saw torn contents";
    EXPECT_EQ(lost.load(), 0)
        << "operations found the tensor with contents but no valid copy: a "
           "failed Write dropped its only copy";
    EXPECT_GT(env.device->injected(), 0u);
    std::vector<std::byte> out(kSize);
    absl::Status r = env.store->Read(id, out.data(), kSize);
    ASSERT_TRUE(r.ok()) << "tensor unreadable after the fault storm: " << r;
    EXPECT_TRUE(Consistent(out.data(), kSize));
    ASSERT_TRUE(env.store->Destroy(id).ok());
    env.ExpectNoSpaceHeld();
  });
}

}  // namespace
}  // namespace strata
