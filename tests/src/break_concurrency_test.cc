// break_concurrency_test.cc: many threads on the store at once, in random
// order (tests/util/break_test_util.h says what the break tests check):
// conflicting acquires, destroy against acquire and prefetch,
// prefetch storms on full tiers, mixed homes against a reference, closing the
// store while leases are released (storms on one tensor:
// break_storm_test.cc). Races that need a particular interleaving are
// forced in break_race_test.cc instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "strata/store.h"
#include "tests/util/break_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::Consistent;
using ::strata::testing::FillPattern;
using ::strata::testing::FillTagged;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using Code = absl::StatusCode;

// Conflicting acquires must fail at once with FailedPrecondition, from any
// tier, while a writer holds the tensor -- never block.
TEST(BreakConcurrencyTest, ConflictingAcquiresFailFastNeverBlock) {
  RunIsolated(30, [] {
    BreakEnv env;
    TensorId id = env.Make(4096);
    ASSERT_TRUE(env.store->Write(id, Pattern(4096, 1).data(), 4096).ok());
    for (Tier held : {Tier::kDevice, Tier::kHost}) {
      auto w = env.store->Acquire(id, held, Access::kWrite);
      ASSERT_TRUE(w.ok());
      for (Tier t : {Tier::kDevice, Tier::kHost}) {
        for (Access a : {Access::kRead, Access::kWrite, Access::kOverwrite}) {
          EXPECT_EQ(env.store->Acquire(id, t, a).status().code(),
                    Code::kFailedPrecondition);
        }
      }
      std::byte b;
      EXPECT_EQ(env.store->Read(id, &b, 1).code(), Code::kFailedPrecondition);
      EXPECT_EQ(env.store->Write(id, &b, 1).code(), Code::kFailedPrecondition);
      EXPECT_EQ(env.store->Evict(id, Tier::kNvme).code(),
                Code::kFailedPrecondition);
      EXPECT_EQ(env.store->Discard(id).code(), Code::kFailedPrecondition);
      EXPECT_EQ(env.store->Destroy(id).code(), Code::kFailedPrecondition);
      EXPECT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
      FillPattern(w->data(), 4096, 2);
      ASSERT_TRUE(w->Release().ok());
      EXPECT_TRUE(env.Holds(id, 4096, 2));
      ASSERT_TRUE(env.store->Write(id, Pattern(4096, 1).data(), 4096).ok());
    }
  });
}

// The slots DestroyRacesAcquireAndPrefetch's threads share: a tensor id each,
// 0 while the slot is empty.
constexpr int kSlots = 16;
using Slots = std::vector<std::atomic<uint64_t>>;

// The creator: destroys a full slot's tensor or fills an empty slot with a new
// one, 3000 times, then tells the users to stop.
void DestroyAndRecreate(BreakEnv& env, Slots& ids, std::atomic<bool>& stop,
                        std::atomic<int>& bad) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 3000; ++i) {
    auto& slot = ids[rng() % kSlots];
    uint64_t cur = slot.load();
    if (cur != 0) {
      absl::Status s = env.store->Destroy(TensorId{cur});
      if (s.ok()) {
        slot = 0;
      } else if (s.code() != Code::kFailedPrecondition) {
        ++bad;
        ADD_FAILURE() << s;
      }
    } else {
      const uint64_t size = 1 + rng() % (200 * 1024);
      const Tier home = rng() % 4 == 0 ? Tier::kHost : Tier::kNvme;
      auto id =
          env.store->Create({.name = "r", .size_bytes = size, .home = home});
      if (!id.ok()) {
        if (id.status().code() != Code::kResourceExhausted) {
          ++bad;
          ADD_FAILURE() << id.status();
        }
        continue;
      }
      slot = id->value;
    }
  }
  stop = true;
}

// One random use of a tensor that may be destroyed under it: an acquire,
// prefetch, evict or discard; returns its status.
absl::Status UseOnce(BreakEnv& env, std::mt19937_64& rng, TensorId id) {
  const Tier tier = rng() % 2 ? Tier::kDevice : Tier::kHost;
  absl::Status s;
  switch (rng() % 5) {
    case 0: {
      auto l = env.store->Acquire(id, tier, Access::kOverwrite);
      s = l.status();
      if (l.ok()) std::memset(l->data(), 1, l->size_bytes());
      break;
    }
    case 1: {
      auto l = env.store->Acquire(id, tier, Access::kRead);
      s = l.status();
      break;
    }
    case 2:
      s = env.store->Prefetch(id, tier);
      break;
    case 3:
      s = env.store->Evict(id, Tier::kHost);
      break;
    default:
      s = env.store->Discard(id);
      break;
  }
  return s;
}

// A user: random uses of the slots' tensors until the creator stops; only
// NotFound / FailedPrecondition / ResourceExhausted may come back.
void UseUntilStopped(BreakEnv& env, const Slots& ids,
                     const std::atomic<bool>& stop, int index,
                     std::atomic<int>& bad) {
  std::mt19937_64 rng(100 + index);
  while (!stop) {
    const uint64_t cur = ids[rng() % kSlots].load();
    if (cur == 0) continue;
    const absl::Status s = UseOnce(env, rng, TensorId{cur});
    if (!s.ok() && s.code() != Code::kNotFound &&
        s.code() != Code::kFailedPrecondition &&
        s.code() != Code::kResourceExhausted) {
      ++bad;
      ADD_FAILURE() << s;
    }
  }
}

// Threads acquire/release many tensors while another thread destroys and
// re-creates them: only NotFound / FailedPrecondition / ResourceExhausted.
TEST(BreakConcurrencyTest, DestroyRacesAcquireAndPrefetch) {
  RunIsolated(120, [] {
    BreakEnv env(kMiB, kMiB, 16 * kMiB);
    Slots ids(kSlots);
    for (auto& v : ids) v = 0;
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    threads.emplace_back([&] { DestroyAndRecreate(env, ids, stop, bad); });
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] { UseUntilStopped(env, ids, stop, t, bad); });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    for (auto& v : ids) {
      if (v != 0) {
        EXPECT_TRUE(env.store->Destroy(TensorId{v.load()}).ok());
      }
    }
    env.ExpectNoSpaceHeld();
  });
}

// Prefetch storms while the device and host are full of leases: every hint is
// accepted, none blocks the caller, failures are counted, and closing the
// store with hints still queued finishes promptly.
TEST(BreakConcurrencyTest, PrefetchStormOnFullTiersThenClose) {
  RunIsolated(90, [] {
    auto env =
        std::make_unique<BreakEnv>(kMiB, kMiB, 32 * kMiB, [](StoreOptions& o) {
          o.device.sim_link_gbps = 1;
          o.device.sim_latency_seconds = 0.001;
          o.scheduler.prefetch_threads = 4;
        });
    constexpr uint64_t kSize = 256 * 1024;
    std::vector<TensorId> holders, others;
    std::vector<Lease> held;
    for (int i = 0; i < 4; ++i) {
      TensorId h = env->Make(kSize);
      auto ld = env->store->Acquire(h, Tier::kDevice, Access::kOverwrite);
      ASSERT_TRUE(ld.ok()) << ld.status();
      held.push_back(std::move(*ld));
      holders.push_back(h);
      TensorId g = env->Make(kSize, Tier::kHost);
      auto lh = env->store->Acquire(g, Tier::kHost, Access::kOverwrite);
      ASSERT_TRUE(lh.ok()) << lh.status();
      held.push_back(std::move(*lh));
      holders.push_back(g);
    }
    for (int i = 0; i < 16; ++i) {
      TensorId o = env->Make(kSize);
      // Contents land on NVMe (host has no room: Write goes via... nothing).
      others.push_back(o);
    }
    // Host and device are full of leases: writes to NVMe tensors fail with
    // ResourceExhausted; prefetches of empty tensors are no-ops.
    std::byte b{1};
    EXPECT_EQ(env->store->Write(others[0], &b, 1).code(),
              Code::kResourceExhausted);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> storm;
    for (int t = 0; t < 4; ++t) {
      storm.emplace_back([&, t] {
        for (int i = 0; i < 2000; ++i) {
          TensorId id = i % 2 ? others[(i + t) % others.size()]
                              : holders[(i + t) % holders.size()];
          absl::Status s = env->store->Prefetch(
              id, i % 3 == 0 ? Tier::kHost : Tier::kDevice);
          if (!s.ok() && s.code() != Code::kInvalidArgument) ADD_FAILURE() << s;
        }
      });
    }
    for (std::thread& t : storm) t.join();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20))
        << "Prefetch blocked its callers";
    // Release the device leases and give the NVMe tensors contents, then
    // storm again with slow transfers, and close with hints queued.
    held.clear();
    for (size_t i = 0; i < others.size(); ++i) {
      ASSERT_TRUE(
          env->store->Write(others[i], Pattern(kSize, i + 1).data(), kSize)
              .ok());
      ASSERT_TRUE(env->store->Evict(others[i], Tier::kNvme).ok());
    }
    for (int i = 0; i < 5000; ++i) {
      ASSERT_TRUE(
          env->store->Prefetch(others[i % others.size()], Tier::kDevice).ok());
    }
    const auto close_start = std::chrono::steady_clock::now();
    env->store.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - close_start,
              std::chrono::seconds(20))
        << "closing with queued prefetches took too long";
  });
}

// A tensor a MixedHomesPartialWritesModel worker owns, and the reference its
// contents must match (`has`: it was written since it was created or
// discarded).
struct Own {
  TensorId id;
  uint64_t size;
  Tier home;
  std::vector<std::byte> ref;
  bool has = false;
};

// A worker's four tensors, one with each home and two on NVMe; one the tiny
// tiers cannot hold is left out (ResourceExhausted), any other error counted.
std::vector<Own> CreateOwn(BreakEnv& env, std::mt19937_64& rng,
                           std::atomic<int>& bad) {
  std::vector<Own> own;
  for (int i = 0; i < 4; ++i) {
    const Tier home = i == 0   ? Tier::kDevice
                      : i == 1 ? Tier::kHost
                               : Tier::kNvme;
    const uint64_t size = 1 + rng() % (home == Tier::kDevice ? 60000 : 300000);
    auto id =
        env.store->Create({.name = "m", .size_bytes = size, .home = home});
    if (!id.ok()) {
      if (id.status().code() != Code::kResourceExhausted) {
        ++bad;
        ADD_FAILURE() << id.status();
      }
      continue;
    }
    own.push_back({*id, size, home, std::vector<std::byte>(size), false});
  }
  return own;
}

// A write of a random range, mirrored in the reference when it works.
absl::Status PartialWrite(BreakEnv& env, std::mt19937_64& rng, Own& o) {
  const uint64_t off = rng() % o.size;
  const uint64_t n = rng() % (o.size - off + 1);
  std::vector<std::byte> data = Pattern(n, rng());
  absl::Status st = env.store->Write(o.id, data.data(), n, off);
  if (st.ok()) {
    if (!o.has) std::fill(o.ref.begin(), o.ref.end(), std::byte{0});
    std::copy(data.begin(), data.end(), o.ref.begin() + off);
    o.has = true;
  }
  return st;
}

// A read of a random range: refused while the tensor is empty, else it must
// match the reference.
absl::Status PartialRead(BreakEnv& env, std::mt19937_64& rng, Own& o,
                         std::atomic<int>& bad) {
  const uint64_t off = rng() % o.size;
  const uint64_t n = rng() % (o.size - off + 1);
  std::vector<std::byte> out(n);
  absl::Status st = env.store->Read(o.id, out.data(), n, off);
  if (!o.has) {
    if (st.code() != Code::kFailedPrecondition) {
      ++bad;
      ADD_FAILURE() << "read of empty tensor: " << st;
    }
    st = absl::OkStatus();
  } else if (st.ok() &&
             !std::equal(out.begin(), out.end(), o.ref.begin() + off)) {
    ++bad;
    ADD_FAILURE() << "partial read mismatch, home " << TierName(o.home);
  }
  return st;
}

// A write lease must show the reference; one byte is flipped in both.
absl::Status FlipUnderWriteLease(BreakEnv& env, std::mt19937_64& rng, Own& o,
                                 std::atomic<int>& bad) {
  const Tier tier =
      o.home == Tier::kDevice || rng() % 2 ? Tier::kDevice : Tier::kHost;
  auto l = env.store->Acquire(o.id, tier, Access::kWrite);
  absl::Status st = l.status();
  if (l.ok()) {
    if (!o.has) std::fill(o.ref.begin(), o.ref.end(), std::byte{0});
    if (std::memcmp(l->data(), o.ref.data(), o.size) != 0) {
      ++bad;
      ADD_FAILURE() << "write lease shows wrong contents on " << TierName(tier)
                    << " home " << TierName(o.home);
    }
    const uint64_t off = rng() % o.size;
    static_cast<std::byte*>(l->data())[off] ^= std::byte{0xff};
    o.ref[off] ^= std::byte{0xff};
    o.has = true;
  }
  return st;
}

// An evict towards the home (or NVMe), sometimes followed by one to the host.
absl::Status EvictSomewhere(BreakEnv& env, std::mt19937_64& rng, Own& o) {
  const Tier to = o.home == Tier::kNvme && rng() % 2 ? Tier::kNvme : o.home;
  absl::Status st = env.store->Evict(o.id, to);
  if (o.home != Tier::kDevice && rng() % 2)
    st.Update(env.store->Evict(o.id, Tier::kHost));
  return st;
}

// A device read lease must show the reference (unless the tensor is empty).
absl::Status CheckReadLease(BreakEnv& env, Own& o, std::atomic<int>& bad) {
  auto l = env.store->Acquire(o.id, Tier::kDevice, Access::kRead);
  absl::Status st = l.status();
  if (!o.has) {
    st = absl::OkStatus();
  } else if (l.ok() && std::memcmp(l->data(), o.ref.data(), o.size) != 0) {
    ++bad;
    ADD_FAILURE() << "read lease mismatch home " << TierName(o.home);
  }
  return st;
}

// One random operation on an owned tensor; returns its status (checks of the
// contents count into `bad` themselves).
absl::Status ModelStep(BreakEnv& env, std::mt19937_64& rng, Own& o,
                       std::atomic<int>& bad) {
  switch (rng() % 7) {
    case 0:
      return PartialWrite(env, rng, o);
    case 1:
      return PartialRead(env, rng, o, bad);
    case 2:
      return FlipUnderWriteLease(env, rng, o, bad);
    case 3:
      return EvictSomewhere(env, rng, o);
    case 4:
      return env.store->Prefetch(o.id, Tier::kDevice);
    case 5: {  // now and then a discard, which empties the reference
      if (rng() % 5 != 0) return absl::OkStatus();
      absl::Status st = env.store->Discard(o.id);
      if (st.ok()) o.has = false;
      return st;
    }
    default:
      return CheckReadLease(env, o, bad);
  }
}

// A worker: creates its tensors, runs up to 600 random steps on them
// (anything but ResourceExhausted counts as bad), then destroys them.
void MixedHomesWorker(BreakEnv& env, int index, std::atomic<int>& bad) {
  std::mt19937_64 rng(1000 + index);
  std::vector<Own> own = CreateOwn(env, rng, bad);
  for (int step = 0; step < 600 && !own.empty(); ++step) {
    Own& o = own[rng() % own.size()];
    absl::Status st = ModelStep(env, rng, o, bad);
    if (!st.ok() && st.code() != Code::kResourceExhausted) {
      ++bad;
      ADD_FAILURE() << "unexpected: " << st;
    }
  }
  for (Own& o : own) {
    absl::Status d = env.store->Destroy(o.id);
    if (!d.ok()) {
      ++bad;
      ADD_FAILURE() << d;
    }
  }
}

// Mixed homes, partial writes and leases from several threads on their own
// tensors, all competing for tiny tiers; contents always match a reference.
TEST(BreakConcurrencyTest, MixedHomesPartialWritesModel) {
  RunIsolated(180, [] {
    BreakEnv env(kMiB, kMiB, 24 * kMiB);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] { MixedHomesWorker(env, t, bad); });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    env.ExpectNoSpaceHeld();
  });
}

// Closing the store while other threads release (or destroy) their leases:
// no crash, and every Release is OK or FailedPrecondition.
TEST(BreakConcurrencyTest, StoreDestructionRacesLeaseReleases) {
  RunIsolated(120, [] {
    for (int round = 0; round < 40; ++round) {
      auto env = std::make_unique<BreakEnv>(kMiB, kMiB, 8 * kMiB);
      std::vector<Lease> leases;
      for (int i = 0; i < 8; ++i) {
        TensorId id =
            env->Make(10000 + i, i % 3 == 0 ? Tier::kDevice : Tier::kNvme);
        auto l = env->store->Acquire(id, i % 2 ? Tier::kHost : Tier::kDevice,
                                     Access::kOverwrite);
        if (i % 3 == 0 && i % 2) continue;  // device home: no host lease
        ASSERT_TRUE(l.ok()) << l.status();
        leases.push_back(std::move(*l));
      }
      std::atomic<int> go{0};
      std::vector<std::thread> threads;
      for (size_t i = 0; i < leases.size(); ++i) {
        threads.emplace_back([&, i] {
          while (go.load() == 0) {
          }
          if (i % 2) {
            absl::Status s = leases[i].Release();
            if (!s.ok() && s.code() != Code::kFailedPrecondition)
              ADD_FAILURE() << s;
          } else {
            Lease gone = std::move(leases[i]);  // destructor releases
          }
        });
      }
      go = 1;
      if (round % 2) std::this_thread::yield();
      env->store.reset();
      for (std::thread& t : threads) t.join();
    }
  });
}

}  // namespace
}  // namespace strata
