// break_storm_test.cc: many threads on ONE tensor at once, in random order
// (tests/util/break_test_util.h says what the break tests check): every
// operation works or fails with FailedPrecondition, none hangs, and no
// read sees a torn write.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <functional>
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
using ::strata::testing::FillTagged;
using ::strata::testing::RunIsolated;
using Code = absl::StatusCode;

// One tensor that many threads hammer at once (StormOnOneTensor), and what
// they saw: torn data or an unexpected status (`bad`), and the calls that
// worked.
struct Storm {
  static constexpr uint64_t kSize = 300 * 1024 + 5;
  BreakEnv& env;
  TensorId id;
  Tier home;
  std::atomic<int> bad{0};
  std::atomic<uint64_t> next_seed{2};
  std::atomic<uint64_t> ok_ops{0};

  void Torn(const char* what, Tier tier) {
    ++bad;
    ADD_FAILURE() << "torn " << what << " on " << TierName(tier);
  }

  // A read or write lease on `tier`, checked for a torn copy.
  absl::Status Lease(std::mt19937_64& rng, Tier tier, bool write) {
    const Access a = !write      ? Access::kRead
                     : rng() % 2 ? Access::kWrite
                                 : Access::kOverwrite;
    auto l = env.store->Acquire(id, tier, a);
    if (!l.ok()) return l.status();
    if (a != Access::kOverwrite && !Consistent(l->data(), kSize)) {
      Torn(write ? "write lease" : "read lease", tier);
    }
    if (write) {
      FillTagged(l->data(), kSize, next_seed++);
    } else if (rng() % 4 == 0) {
      std::this_thread::yield();
    }
    return absl::OkStatus();
  }

  // One random operation (acquire, Read, Write, Evict, Prefetch, Discard).
  absl::Status Op(std::mt19937_64& rng, std::vector<std::byte>& buf) {
    const Tier tier =
        home == Tier::kDevice || rng() % 2 ? Tier::kDevice : Tier::kHost;
    switch (rng() % 9) {
      case 0:
      case 1:
        return Lease(rng, tier, /*write=*/false);
      case 2:
      case 3:
        return Lease(rng, tier, /*write=*/true);
      case 4: {
        absl::Status st = env.store->Read(id, buf.data(), kSize);
        if (st.ok() && !Consistent(buf.data(), kSize)) {
          ++bad;
          ADD_FAILURE() << "torn Read";
        }
        return st;
      }
      case 5:
        FillTagged(buf.data(), kSize, next_seed++);
        return env.store->Write(id, buf.data(), kSize);
      case 6: {
        const Tier to = home == Tier::kDevice ? Tier::kDevice
                        : home == Tier::kHost ? Tier::kHost
                        : rng() % 2           ? Tier::kHost
                                              : Tier::kNvme;
        return env.store->Evict(id, to);
      }
      case 7:
        return env.store->Prefetch(id, tier);
      default:
        return rng() % 10 == 0 ? env.store->Discard(id) : absl::OkStatus();
    }
  }

  void Worker(int index, int ops) {
    std::mt19937_64 rng(index * 7919 + static_cast<int>(home));
    std::vector<std::byte> buf(kSize);
    for (int i = 0; i < ops; ++i) {
      const absl::Status st = Op(rng, buf);
      if (st.ok()) {
        ++ok_ops;
      } else if (st.code() != Code::kFailedPrecondition) {
        ++bad;
        ADD_FAILURE() << "unexpected status: " << st;
      }
    }
  }
};

// Many threads on ONE tensor: every acquire/evict/discard/prefetch/read/write
// either works or fails with FailedPrecondition (conflict) -- never hangs --
// and every read sees a whole write, never a torn one.
void StormOnOneTensor(const std::function<void(StoreOptions&)>& tweak,
                      int ops_per_thread, int timeout_s) {
  RunIsolated(timeout_s, [&] {
    BreakEnv env(2 * kMiB, 2 * kMiB, 16 * kMiB, tweak);
    for (Tier home : {Tier::kNvme, Tier::kHost, Tier::kDevice}) {
      Storm storm{
          .env = env, .id = env.Make(Storm::kSize, home, "hot"), .home = home};
      std::vector<std::byte> init(Storm::kSize);
      FillTagged(init.data(), Storm::kSize, 1);
      ASSERT_TRUE(env.store->Write(storm.id, init.data(), Storm::kSize).ok());
      std::vector<std::thread> threads;
      for (int t = 0; t < 8; ++t) {
        threads.emplace_back(
            [&storm, t, ops_per_thread] { storm.Worker(t, ops_per_thread); });
      }
      for (std::thread& t : threads) t.join();
      EXPECT_EQ(storm.bad.load(), 0);
      EXPECT_GT(storm.ok_ops.load(), static_cast<uint64_t>(ops_per_thread) / 4);
      std::printf("storm home=%s: %llu ops ok\n",
                  std::string(TierName(home)).c_str(),
                  static_cast<unsigned long long>(storm.ok_ops.load()));
      EXPECT_EQ(env.store->GetResidency(storm.id)->leases, 0);
      ASSERT_TRUE(env.store->Destroy(storm.id).ok());
    }
    env.ExpectNoSpaceHeld();
  });
}

TEST(BreakConcurrencyTest, StormOnOneTensor) { StormOnOneTensor({}, 400, 120); }

// The same with a slow simulated link, so transfers are in flight while the
// other threads act (wider race windows).
TEST(BreakConcurrencyTest, StormOnOneTensorSlowLink) {
  StormOnOneTensor(
      [](StoreOptions& o) {
        o.device.sim_link_gbps = 2;
        o.device.sim_latency_seconds = 0.0005;
        o.nvme.engine = IoEngine::kThreadPool;
      },
      120, 180);
}

}  // namespace
}  // namespace strata
