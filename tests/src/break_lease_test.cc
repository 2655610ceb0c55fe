// break_lease_test.cc: adversarial use of leases (tests/util/break_test_util.h
// says what the break tests check): misuse, leases outliving their store,
// every tier and access on every lifecycle state, eviction to every tier,
// device-home rules, lease accounting and id reuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "strata/store.h"
#include "tests/util/break_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

TEST(BreakLeaseTest, LeaseMisuse) {
  BreakEnv env;
  TensorId x = env.Make(4096, Tier::kNvme, "x");
  TensorId y = env.Make(4096, Tier::kNvme, "y");
  ASSERT_TRUE(env.store->Write(x, Pattern(4096, 1).data(), 4096).ok());
  ASSERT_TRUE(env.store->Write(y, Pattern(4096, 2).data(), 4096).ok());

  Lease empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(empty.Release().code(), Code::kFailedPrecondition);
  EXPECT_EQ(empty.Release().code(), Code::kFailedPrecondition);

  auto a = env.store->Acquire(x, Tier::kHost, Access::kRead);
  auto b = env.store->Acquire(y, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(a.ok() && b.ok());
  // Move-assign over a live lease releases the old one.
  *a = std::move(*b);
  EXPECT_EQ(env.store->GetResidency(x)->leases, 0);
  EXPECT_EQ(env.store->GetResidency(y)->leases, 1);
  EXPECT_EQ(a->id(), y);
  EXPECT_EQ(a->tier(), Tier::kDevice);
  EXPECT_FALSE(b->valid());
  EXPECT_EQ(b->Release().code(), Code::kFailedPrecondition);
  // Self move-assign keeps the lease.
  Lease& alias = *a;
  *a = std::move(alias);
  EXPECT_TRUE(a->valid());
  EXPECT_EQ(env.store->GetResidency(y)->leases, 1);
  EXPECT_TRUE(MatchesPattern(a->data(), 4096, 2));
  EXPECT_TRUE(a->Release().ok());
  absl::Status twice = a->Release();
  EXPECT_EQ(twice.code(), Code::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("already released"));
  // Moving a released lease: still released, not "live".
  Lease moved = std::move(*a);
  EXPECT_FALSE(moved.valid());
  EXPECT_EQ(moved.Release().code(), Code::kFailedPrecondition);
  EXPECT_EQ(env.store->GetResidency(y)->leases, 0);
  EXPECT_EQ(env.store->GetStats().tiers[0].leased_bytes, 0u);
  EXPECT_EQ(env.store->GetStats().tiers[1].leased_bytes, 0u);
  // Destroy refuses while leased, accepts after.
  auto c = env.store->Acquire(x, Tier::kHost, Access::kWrite);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(env.store->Destroy(x).code(), Code::kFailedPrecondition);
  c->Release().IgnoreError();
  EXPECT_TRUE(env.store->Destroy(x).ok());
  EXPECT_TRUE(env.store->Destroy(y).ok());
  env.ExpectNoSpaceHeld();
}

TEST(BreakLeaseTest, LeasesOutlivingTheirStore) {
  RunIsolated(30, [] {
    Lease survivor;
    Lease device_survivor;
    Lease other_store_lease;
    auto env2 = std::make_unique<BreakEnv>();
    TensorId z = env2->Make(4096);
    auto lz = env2->store->Acquire(z, Tier::kHost, Access::kOverwrite);
    ASSERT_TRUE(lz.ok());
    other_store_lease = std::move(*lz);
    {
      auto env = std::make_unique<BreakEnv>();
      TensorId x = env->Make(8192);
      TensorId y = env->Make(8192, Tier::kDevice);
      auto l1 = env->store->Acquire(x, Tier::kHost, Access::kOverwrite);
      auto l2 = env->store->Acquire(y, Tier::kDevice, Access::kOverwrite);
      auto l3 = env->store->Acquire(x, Tier::kDevice, Access::kRead);
      ASSERT_TRUE(l1.ok() && l2.ok());
      EXPECT_EQ(l3.status().code(), Code::kFailedPrecondition);
      survivor = std::move(*l1);
      device_survivor = std::move(*l2);
      env->store.reset();  // close with live leases
    }
    absl::Status s = survivor.Release();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr("closed"));
    // Move-assign a dead store's lease over a live lease of another store:
    // the live one is released properly.
    other_store_lease = std::move(device_survivor);
    EXPECT_EQ(env2->store->GetResidency(z)->leases, 0);
    EXPECT_TRUE(env2->store->Destroy(z).ok());
    env2->ExpectNoSpaceHeld();
    env2.reset();
    // other_store_lease (dead store) is destroyed at scope exit: no crash.
  });
}

// Every tier x access on new, written, discarded and destroyed tensors of
// every home.
TEST(BreakLeaseTest, EveryTierAndAccessOnEveryLifecycleState) {
  BreakEnv env;
  constexpr uint64_t kSize = 5000;
  for (Tier home : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
    TensorId id = env.Make(kSize, home);
    auto check = [&](const char* state, bool has_contents, uint64_t seed) {
      for (Tier tier : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
        for (Access acc : {Access::kRead, Access::kWrite, Access::kOverwrite}) {
          SCOPED_TRACE(::testing::Message()
                       << state << " home=" << TierName(home) << " tier="
                       << TierName(tier) << " access=" << AccessName(acc));
          auto lease = env.store->Acquire(id, tier, acc);
          if (tier == Tier::kNvme ||
              static_cast<int>(tier) > static_cast<int>(home)) {
            EXPECT_EQ(lease.status().code(), Code::kInvalidArgument)
                << lease.status();
            continue;
          }
          if (acc == Access::kRead && !has_contents) {
            EXPECT_EQ(lease.status().code(), Code::kFailedPrecondition)
                << lease.status();
            continue;
          }
          ASSERT_TRUE(lease.ok()) << lease.status();
          EXPECT_EQ(lease->size_bytes(), kSize);
          EXPECT_EQ(lease->tier(), tier);
          EXPECT_EQ(lease->access(), acc);
          if (acc != Access::kOverwrite) {
            if (has_contents) {
              EXPECT_TRUE(MatchesPattern(lease->data(), kSize, seed));
            } else {
              EXPECT_EQ(std::vector<std::byte>(
                            static_cast<std::byte*>(lease->data()),
                            static_cast<std::byte*>(lease->data()) + kSize),
                        std::vector<std::byte>(kSize))
                  << "kWrite of an empty tensor must present zeros";
            }
          }
          if (acc != Access::kRead) {
            // Keep the contents (or the emptiness) as they were.
            if (has_contents) {
              FillPattern(lease->data(), kSize, seed);
            } else {
              std::memset(lease->data(), 0, kSize);
            }
          }
          EXPECT_TRUE(lease->Release().ok());
          if (acc != Access::kRead && !has_contents) {
            // A write lease gives the tensor contents (zeros): drop them again.
            ASSERT_TRUE(env.store->Discard(id).ok());
          }
        }
      }
    };
    check("new", false, 0);
    ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 9).data(), kSize).ok());
    check("written", true, 9);
    ASSERT_TRUE(env.store->Discard(id).ok());
    EXPECT_FALSE(env.store->GetResidency(id)->has_contents);
    check("discarded", false, 0);
    ASSERT_TRUE(env.store->Destroy(id).ok());
    for (Tier tier : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
      for (Access acc : {Access::kRead, Access::kWrite, Access::kOverwrite}) {
        EXPECT_EQ(env.store->Acquire(id, tier, acc).status().code(),
                  Code::kNotFound);
      }
      EXPECT_EQ(env.store->Evict(id, tier).code(), Code::kNotFound);
      EXPECT_EQ(env.store->Prefetch(id, tier).code(), Code::kNotFound);
    }
    EXPECT_EQ(env.store->Discard(id).code(), Code::kNotFound);
    EXPECT_EQ(env.store->Destroy(id).code(), Code::kNotFound);
    EXPECT_EQ(env.store->GetSpec(id).status().code(), Code::kNotFound);
    EXPECT_EQ(env.store->GetResidency(id).status().code(), Code::kNotFound);
  }
  env.ExpectNoSpaceHeld();
}

// Evict to every tier for every home, with the contents on every tier.
TEST(BreakLeaseTest, EvictToEveryTierForEveryHome) {
  BreakEnv env;
  constexpr uint64_t kSize = 70000;
  for (Tier home : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
    for (Tier where : {Tier::kDevice, Tier::kHost}) {
      if (static_cast<int>(where) > static_cast<int>(home)) continue;
      for (Tier to : {Tier::kDevice, Tier::kHost, Tier::kNvme}) {
        SCOPED_TRACE(::testing::Message()
                     << "home=" << TierName(home) << " data on "
                     << TierName(where) << " evict to " << TierName(to));
        TensorId id = env.Make(kSize, home);
        {
          auto l = env.store->Acquire(id, where, Access::kOverwrite);
          ASSERT_TRUE(l.ok()) << l.status();
          FillPattern(l->data(), kSize, 77);
        }
        absl::Status s = env.store->Evict(id, to);
        if (static_cast<int>(to) > static_cast<int>(home)) {
          EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
        } else {
          EXPECT_TRUE(s.ok()) << s;
          Residency r = *env.store->GetResidency(id);
          for (int t = 0; t < static_cast<int>(to); ++t) {
            EXPECT_EQ(r.tiers[t], Residency::State::kAbsent) << t;
          }
        }
        EXPECT_TRUE(env.Holds(id, kSize, 77));
        // Evicting an empty tensor is a no-op.
        ASSERT_TRUE(env.store->Discard(id).ok());
        EXPECT_EQ(env.store->Evict(id, home).code(), Code::kOk);
        ASSERT_TRUE(env.store->Destroy(id).ok());
      }
    }
  }
  env.ExpectNoSpaceHeld();
}

TEST(BreakLeaseTest, DeviceHomeTensorRules) {
  BreakEnv env;
  constexpr uint64_t kSize = 100000;
  TensorId id = env.Make(kSize, Tier::kDevice);
  EXPECT_EQ(
      env.store->Acquire(id, Tier::kHost, Access::kOverwrite).status().code(),
      Code::kInvalidArgument);
  EXPECT_EQ(env.store->Prefetch(id, Tier::kHost).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(env.store->Evict(id, Tier::kHost).code(), Code::kInvalidArgument);
  EXPECT_EQ(env.store->Evict(id, Tier::kNvme).code(), Code::kInvalidArgument);
  EXPECT_TRUE(env.store->Prefetch(id, Tier::kDevice).ok());
  ASSERT_TRUE(env.store->Write(id, Pattern(kSize, 3).data(), kSize).ok());
  EXPECT_TRUE(env.store->Evict(id, Tier::kDevice).ok());
  EXPECT_TRUE(env.Holds(id, kSize, 3));
  // Partial write at an odd offset.
  auto part = Pattern(333, 4);
  ASSERT_TRUE(env.store->Write(id, part.data(), 333, 12345).ok());
  std::vector<std::byte> out(333);
  ASSERT_TRUE(env.store->Read(id, out.data(), 333, 12345).ok());
  EXPECT_EQ(out, part);
  EXPECT_EQ(env.store->GetStats().tiers[1].used_bytes, 0u)
      << "a device-home tensor never needs host space";
  ASSERT_TRUE(env.store->Destroy(id).ok());
  env.ExpectNoSpaceHeld();
}

TEST(BreakLeaseTest, LeasedBytesAndIdsNeverReused) {
  BreakEnv env;
  std::set<uint64_t> seen;
  for (int i = 0; i < 50; ++i) {
    TensorId id = env.Make(1 + i * 1000);
    EXPECT_TRUE(seen.insert(id.value).second) << "id reused: " << id.value;
    ASSERT_TRUE(env.store->Destroy(id).ok());
  }
  TensorId id = env.Make(5000);
  ASSERT_TRUE(env.store->Write(id, Pattern(5000, 1).data(), 5000).ok());
  std::vector<Lease> reads;
  for (int i = 0; i < 10; ++i) {
    auto l = env.store->Acquire(id, i % 2 ? Tier::kHost : Tier::kDevice,
                                Access::kRead);
    ASSERT_TRUE(l.ok()) << l.status();
    reads.push_back(std::move(*l));
  }
  Stats st = env.store->GetStats();
  EXPECT_EQ(st.tiers[0].leased_bytes, 5120u);  // one 256 B-rounded extent
  EXPECT_EQ(st.tiers[1].leased_bytes, 8192u);  // one 4 KiB-rounded extent
  EXPECT_EQ(env.store->GetResidency(id)->leases, 10);
  reads.resize(3);
  EXPECT_EQ(env.store->GetResidency(id)->leases, 3);
  reads.clear();
  st = env.store->GetStats();
  EXPECT_EQ(st.tiers[0].leased_bytes, 0u);
  EXPECT_EQ(st.tiers[1].leased_bytes, 0u);
  ASSERT_TRUE(env.store->Destroy(id).ok());
  env.ExpectNoSpaceHeld();
}

}  // namespace
}  // namespace strata
