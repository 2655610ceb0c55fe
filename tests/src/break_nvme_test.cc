// break_nvme_test.cc: the NVMe tier under stress (tests/util/break_test_util.h
// says what the break tests check): striped and shared directories with odd
// sizes, and faults in the bounce chunks of transfers larger than host memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "strata/store.h"
#include "tests/util/break_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using Code = absl::StatusCode;

// NVMe striped over several directories (listing one twice is refused), the
// thread-pool engine, odd sizes that straddle stripe units, and two stores
// sharing one directory: every tensor round-trips through NVMe.
TEST(BreakNvmeTest, StripedDirectoriesAndSharedDirectory) {
  RunIsolated(120, [] {
    TempDir root;
    std::vector<std::string> dirs;
    for (int i = 0; i < 3; ++i) {
      dirs.push_back(root.path() + "/d" + std::to_string(i));
      ASSERT_EQ(mkdir(dirs.back().c_str(), 0700), 0);
    }
    StoreOptions o = SmallStoreOptions(dirs[0], 2 * kMiB, 2 * kMiB, 12 * kMiB);
    o.nvme.directories = {dirs[0], dirs[1], dirs[2], dirs[0]};
    o.nvme.engine = IoEngine::kThreadPool;
    EXPECT_EQ(Store::Open(o).status().code(),
              absl::StatusCode::kInvalidArgument);
    o.nvme.directories.pop_back();
    auto a = Store::Open(o);
    ASSERT_TRUE(a.ok()) << a.status();
    StoreOptions o2 = SmallStoreOptions(dirs[0], 4 * kMiB, kMiB, 4 * kMiB);
    auto b = Store::Open(o2);  // same directory as one of a's stripes
    ASSERT_TRUE(b.ok()) << b.status();
    std::vector<std::pair<TensorId, uint64_t>> ta;
    uint64_t seed = 0;
    for (uint64_t size : {uint64_t{1}, uint64_t{65535}, uint64_t{65537},
                          uint64_t{200001}, uint64_t{1000003}}) {
      auto id = (*a)->Create({.name = "a", .size_bytes = size});
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_TRUE((*a)->Write(*id, Pattern(size, ++seed).data(), size).ok());
      ASSERT_TRUE((*a)->Evict(*id, Tier::kNvme).ok());
      ta.push_back({*id, size});
    }
    auto idb = (*b)->Create({.name = "b", .size_bytes = 3 * kMiB});
    ASSERT_TRUE(idb.ok()) << idb.status();
    // b writes 3 MiB through the device (its host tier is 1 MiB).
    absl::Status wb = (*b)->Write(*idb, Pattern(3 * kMiB, 99).data(), 3 * kMiB);
    ASSERT_TRUE(wb.ok()) << wb;
    ASSERT_TRUE((*b)->Evict(*idb, Tier::kNvme).ok());
    seed = 0;
    for (auto [id, size] : ta) {
      ++seed;
      for (Tier t : {Tier::kHost, Tier::kDevice}) {
        auto l = (*a)->Acquire(id, t, Access::kRead);
        ASSERT_TRUE(l.ok()) << l.status();
        EXPECT_TRUE(MatchesPattern(l->data(), size, seed)) << size;
      }
      ASSERT_TRUE((*a)->Evict(id, Tier::kNvme).ok());
    }
    std::vector<std::byte> out(3 * kMiB);
    ASSERT_TRUE((*b)->Read(*idb, out.data(), 3 * kMiB).ok());
    EXPECT_TRUE(MatchesPattern(out.data(), 3 * kMiB, 99));
  });
}

// A tensor larger than the host tier moves NVMe <-> device through the bounce
// chunks; a fault in any chunk fails the transfer cleanly and the last valid
// copy survives.
TEST(BreakNvmeTest, BounceChunkFaultsKeepLastValidCopy) {
  RunIsolated(120, [] {
    BreakEnv env(16 * kMiB, kMiB, 32 * kMiB);
    constexpr uint64_t kSize = 9 * kMiB + 5;  // three 4 MiB bounce chunks
    TensorId id = env.Make(kSize);
    ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 1).data(), kSize).ok());
    ASSERT_TRUE(env.store->Evict(id, Tier::kNvme).ok());
    for (uint64_t nth : {1, 40, 100, 140}) {
      for (FaultKind kind :
           {FaultKind::kEio, FaultKind::kShortRead, FaultKind::kBitFlip}) {
        env.io->set_spec({.nth = nth, .ops = FaultOps::kReads, .kind = kind});
        auto l = env.store->Acquire(id, Tier::kDevice, Access::kRead);
        env.NoFaults();
        if (l.ok()) {
          EXPECT_TRUE(MatchesPattern(l->data(), kSize, 1)) << nth;
          l->Release().IgnoreError();
          ASSERT_TRUE(env.store->Evict(id, Tier::kNvme).ok());
        } else {
          EXPECT_EQ(env.store->GetResidency(id)->tiers[0],
                    Residency::State::kAbsent);
        }
      }
      // Now a dirty device copy, written back with a failing chunk.
      {
        auto w = env.store->Acquire(id, Tier::kDevice, Access::kWrite);
        ASSERT_TRUE(w.ok()) << w.status();
        EXPECT_TRUE(MatchesPattern(w->data(), kSize, 1));
      }
      for (FaultKind kind :
           {FaultKind::kEio, FaultKind::kShortWrite, FaultKind::kEnospc}) {
        env.io->set_spec({.nth = nth, .ops = FaultOps::kWrites, .kind = kind});
        absl::Status e = env.store->Evict(id, Tier::kNvme);
        env.NoFaults();
        if (!e.ok()) {
          EXPECT_EQ(env.store->GetResidency(id)->tiers[0],
                    Residency::State::kDirty)
              << e;
        } else {
          auto w = env.store->Acquire(id, Tier::kDevice, Access::kWrite);
          ASSERT_TRUE(w.ok()) << w.status();
        }
      }
      ASSERT_TRUE(env.store->Evict(id, Tier::kNvme).ok());
      std::vector<std::byte> out(kSize);
      ASSERT_TRUE(env.store->Read(id, out.data(), kSize).ok());
      EXPECT_TRUE(MatchesPattern(out.data(), kSize, 1)) << nth;
    }
    EXPECT_GE(env.io->injected(), 20u);
    ASSERT_TRUE(env.store->Destroy(id).ok());
    env.ExpectNoSpaceHeld();
  });
}

}  // namespace
}  // namespace strata
