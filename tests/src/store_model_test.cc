// Model-based randomized test: thousands of random operations from several
// threads against a plain reference map, with budgets small enough that
// tensors move constantly between all three tiers. Contents must always match
// the reference. With faults injected in the device-copy and block-I/O seams,
// operations may fail but must never lose or corrupt data: once faults stop,
// every tensor still reads back as the reference says.
//
// Seeded and reproducible: STRATA_TEST_SEED (default 1) picks the seed and
// STRATA_STRESS_OPS (default 3000) the operations per thread, so a long run is
// `STRATA_STRESS_OPS=100000 ./store_model_test`. The same run also covers
// unified-memory mode, with and without hints.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

// The codes an operation may fail with while faults are injected (besides a
// full tier, ResourceExhausted, counted apart): what the injectors document
// for the kinds in use (tiers/fault/fault_spec.h) — the device's copy and
// hint faults, the block-I/O kind's own status, and DataLoss where a flipped
// bit passes the block layer and fails the store's checksum. Anything else
// (InvalidArgument, FailedPrecondition, NotFound, Unavailable, ...) fails
// the test. A store bug that returns Internal cannot be told apart from an
// injected device fault by its code.
std::set<absl::StatusCode> CodesUnderFaults(FaultKind io_kind) {
  return {FaultyDevice::InjectedCode(),
          io_kind == FaultKind::kBitFlip
              ? absl::StatusCode::kDataLoss
              : FaultyBlockIo::InjectedCode(io_kind)};
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// What the reference says one tensor holds.
struct Slot {
  std::optional<TensorId> id;
  uint64_t size = 0;
  Tier home = Tier::kNvme;
  std::optional<uint64_t> seed;  // pattern seed of the contents; none: empty
};

// Faults to inject and the wrappers that inject them.
struct Faults {
  double rate = 0;
  FaultyDevice* device = nullptr;
  FaultyBlockIo* block_io = nullptr;
  FaultKind io_kind = FaultKind::kEio;
  void Set(double r, uint64_t seed) const {
    if (device) {
      device->set_spec({.seed = seed, .rate = r, .kind = FaultKind::kTornCopy});
    }
    if (block_io)
      block_io->set_spec({.seed = seed, .rate = r, .kind = io_kind});
  }
};

// One thread's share of the run: it owns its slots, so its reference is
// exact; every thread still competes for the same tiers, and prefetches reach
// other threads' tensors.
class Worker {
 public:
  // `fault_codes`: the codes a failure may have beyond a full tier (empty
  // without faults).
  Worker(Store* store, int index, uint64_t seed,
         std::set<absl::StatusCode> fault_codes, std::vector<Slot>* all_slots,
         int slots_per_worker, std::vector<std::atomic<uint64_t>>* published)
      : store_(store),
        published_(published),
        rng_(seed),
        fault_codes_(std::move(fault_codes)),
        all_(all_slots),
        first_(index * slots_per_worker),
        count_(slots_per_worker) {}

  void Run(uint64_t ops) {
    for (uint64_t i = 0; i < ops && !::testing::Test::HasFatalFailure(); ++i) {
      Step();
    }
    held_.clear();
  }

  uint64_t resource_exhausted = 0;
  uint64_t injected_failures = 0;

 private:
  struct Held {
    Lease lease;
    size_t slot;
  };

  void Publish(const Slot& s, uint64_t id) {
    (*published_)[&s - all_->data()].store(id);
  }
  Slot& Pick() { return (*all_)[first_ + rng_() % count_]; }
  Tier RandomLeaseTier(const Slot& s) {
    return s.home == Tier::kHost || rng_() % 2
               ? Tier::kDevice
               : (rng_() % 2 ? Tier::kHost : Tier::kDevice);
  }

  // An operation failed. A full tier is acceptable; under faults, so are
  // the codes the injectors produce (CodesUnderFaults); nothing else.
  void Failed(const absl::Status& s) {
    if (s.code() == absl::StatusCode::kResourceExhausted) {
      ++resource_exhausted;
      return;
    }
    if (fault_codes_.contains(s.code())) {
      ++injected_failures;
      return;
    }
    ADD_FAILURE() << "not a code the injected faults produce: " << s;
  }

  bool HoldsLease(const Slot& s) const {
    for (const Held& h : held_) {
      if (&(*all_)[h.slot] == &s) return true;
    }
    return false;
  }

  void Step() {
    // Step boundaries now and then: the scheduler records and replays traces
    // and prefetches while the threads race it.
    if (rng_() % 64 == 0) store_->EndStep();
    Slot& s = Pick();
    if (!s.id) return Create(s);
    if (HoldsLease(s)) return ReleaseSome();
    switch (rng_() % 10) {
      case 0:
        return WriteWhole(s);
      case 1:
      case 2:
        return ReadLease(s);
      case 3:
        return WriteLease(s);
      case 4:
        return EvictTo(s);
      case 5:
        return Prefetch();
      case 6:
        return ReadBack(s);
      case 7:
        if (rng_() % 4 == 0) return Discard(s);
        return ReadLease(s);
      case 8:
        if (rng_() % 8 == 0) return Destroy(s);
        return WriteLease(s);
      default:
        return ReleaseSome();
    }
  }

  void Create(Slot& s) {
    s.size = 1 + rng_() % (rng_() % 4 == 0 ? 700 * 1024 : 64 * 1024);
    s.home = rng_() % 5 == 0 ? Tier::kHost : Tier::kNvme;
    auto id =
        store_->Create({.name = "m", .size_bytes = s.size, .home = s.home});
    if (!id.ok()) return Failed(id.status());
    s.id = *id;
    s.seed.reset();
    Publish(s, id->value);
  }

  void WriteWhole(Slot& s) {
    const uint64_t seed = rng_();
    std::vector<std::byte> data(s.size);
    FillPattern(data.data(), s.size, seed);
    absl::Status st = store_->Write(*s.id, data.data(), s.size);
    if (!st.ok()) return Failed(st);
    s.seed = seed;
  }

  void ReadLease(Slot& s) {
    const Tier tier = RandomLeaseTier(s);
    auto lease = store_->Acquire(*s.id, tier, Access::kRead);
    if (!s.seed) {
      EXPECT_EQ(lease.status().code(), absl::StatusCode::kFailedPrecondition);
      return;
    }
    if (!lease.ok()) return Failed(lease.status());
    ASSERT_TRUE(MatchesPattern(lease->data(), s.size, *s.seed))
        << "tensor " << s.id->value << " on " << TierName(tier);
    if (held_.size() < 2 && rng_() % 3 == 0) {
      held_.push_back({std::move(*lease), size_t(&s - all_->data())});
    }
  }

  void WriteLease(Slot& s) {
    const Tier tier = RandomLeaseTier(s);
    const Access access = rng_() % 2 ? Access::kWrite : Access::kOverwrite;
    auto lease = store_->Acquire(*s.id, tier, access);
    if (!lease.ok()) return Failed(lease.status());
    if (access == Access::kWrite && s.seed) {
      ASSERT_TRUE(MatchesPattern(lease->data(), s.size, *s.seed));
    }
    const uint64_t seed = rng_();
    FillPattern(lease->data(), s.size, seed);
    s.seed = seed;
    if (held_.size() < 2 && rng_() % 3 == 0) {
      held_.push_back({std::move(*lease), size_t(&s - all_->data())});
    }
  }

  void EvictTo(Slot& s) {
    const Tier to =
        s.home == Tier::kHost || rng_() % 2 ? Tier::kHost : Tier::kNvme;
    absl::Status st = store_->Evict(*s.id, to);
    if (!st.ok()) Failed(st);
  }

  void Prefetch() {
    // Any thread's tensor: prefetches race other threads' acquires. A stale
    // id (destroyed meanwhile) is NotFound.
    const uint64_t id = (*published_)[rng_() % published_->size()].load();
    if (id == 0) return;
    absl::Status st = store_->Prefetch(TensorId{id}, Tier::kDevice);
    if (!st.ok() && st.code() != absl::StatusCode::kNotFound)
      ADD_FAILURE() << st;
  }

  void ReadBack(Slot& s) {
    std::vector<std::byte> out(s.size);
    absl::Status st = store_->Read(*s.id, out.data(), s.size);
    if (!s.seed) {
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
      return;
    }
    if (!st.ok()) return Failed(st);
    ASSERT_TRUE(MatchesPattern(out.data(), s.size, *s.seed));
  }

  void Discard(Slot& s) {
    absl::Status st = store_->Discard(*s.id);
    if (!st.ok()) return Failed(st);
    s.seed.reset();
  }

  void Destroy(Slot& s) {
    absl::Status st = store_->Destroy(*s.id);
    if (!st.ok()) return Failed(st);
    s.id.reset();
    Publish(s, 0);
  }

  void ReleaseSome() {
    if (held_.empty()) return;
    const size_t i = rng_() % held_.size();
    EXPECT_TRUE(held_[i].lease.Release().ok());
    held_.erase(held_.begin() + i);
  }

  Store* store_;
  std::vector<std::atomic<uint64_t>>* published_;  // slot -> live id or 0
  std::mt19937_64 rng_;
  const std::set<absl::StatusCode> fault_codes_;
  std::vector<Slot>* all_;
  int first_, count_;
  std::vector<Held> held_;
};

// Reads every live tensor back, compares it with the reference, and destroys
// it. In unified mode every read needs a host extent, and home extents can
// fragment the host tier: a read refused for room is retried once others
// have been verified and destroyed.
void VerifyAll(Store* store, const std::vector<Slot>& slots) {
  std::vector<const Slot*> pending;
  for (const Slot& s : slots) {
    if (s.id && s.seed) pending.push_back(&s);
  }
  while (!pending.empty()) {
    std::vector<const Slot*> refused;
    for (const Slot* s : pending) {
      std::vector<std::byte> out(s->size);
      absl::Status st = store->Read(*s->id, out.data(), s->size);
      if (absl::IsResourceExhausted(st)) {
        refused.push_back(s);
        continue;
      }
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_TRUE(MatchesPattern(out.data(), s->size, *s->seed))
          << "tensor " << s->id->value;
      ASSERT_TRUE(store->Destroy(*s->id).ok());
    }
    ASSERT_LT(refused.size(), pending.size()) << "no tensor could be read";
    pending = std::move(refused);
  }
}

// Unified-memory mode under test: off (explicit copies), with or without
// hints.
enum class Mode { kCopies, kUnified, kUnifiedNoHints };

void RunModel(double fault_rate, FaultKind io_fault = FaultKind::kEio,
              Mode mode = Mode::kCopies) {
  constexpr int kThreads = 4, kSlotsPerThread = 12;
  const uint64_t seed = EnvOr("STRATA_TEST_SEED", 1);
  const uint64_t ops = EnvOr("STRATA_STRESS_OPS", 3000);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  ::strata::testing::TempDir dir;
  Faults faults;
  faults.io_kind = io_fault;
  StoreSeams seams;
  seams.wrap_device = [&](std::unique_ptr<DeviceBackend> d) {
    auto f = std::make_unique<FaultyDevice>(std::move(d));
    faults.device = f.get();
    return f;
  };
  seams.wrap_block_io = [&](std::unique_ptr<BlockIo> io) {
    auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
    faults.block_io = f.get();
    return f;
  };
  // Device and host hold a few of the ~48 tensors (up to 700 KiB each).
  StoreOptions options = ::strata::testing::SmallStoreOptions(
      dir.path(), 2 * kMiB, 3 * kMiB, 128 * kMiB);
  if (mode != Mode::kCopies) {
    options.device.memory = DeviceMemory::kUnified;
    options.device.unified_hints = mode == Mode::kUnified;
  }
  auto store = OpenStore(options, seams);
  ASSERT_TRUE(store.ok()) << store.status();
  faults.Set(fault_rate, seed);

  std::vector<Slot> slots(kThreads * kSlotsPerThread);
  std::vector<std::atomic<uint64_t>> published(slots.size());
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(
        std::make_unique<Worker>(store->get(), t, seed * 1000 + t,
                                 fault_rate > 0 ? CodesUnderFaults(io_fault)
                                                : std::set<absl::StatusCode>{},
                                 &slots, kSlotsPerThread, &published));
  }
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&w, ops] { w->Run(ops); });
  for (auto& t : threads) t.join();

  faults.Set(0, seed);
  VerifyAll(store->get(), slots);
  Stats stats = (*store)->GetStats();
  uint64_t exhausted = 0, failures = 0;
  for (auto& w : workers) {
    exhausted += w->resource_exhausted;
    failures += w->injected_failures;
  }
  std::printf(
      "seed %llu: %llu ops/thread; h2d %llu d2h %llu nvme_read %llu "
      "nvme_write %llu transfers; %llu write-backs; %llu full-tier refusals; "
      "%llu failed ops under faults; checksum failures %llu\n",
      (unsigned long long)seed, (unsigned long long)ops,
      (unsigned long long)stats.links[0].transfers,
      (unsigned long long)stats.links[1].transfers,
      (unsigned long long)stats.links[2].transfers,
      (unsigned long long)stats.links[3].transfers,
      (unsigned long long)stats.write_backs, (unsigned long long)exhausted,
      (unsigned long long)failures,
      (unsigned long long)stats.checksum_failures);
  // The budgets must really force movement through every link (without
  // hints, by page faults both ways).
  for (int l = 0; l < kNumLinks; ++l) {
    EXPECT_GT(stats.links[l].transfers, 0u) << LinkName(Link(l));
  }
  if (mode == Mode::kUnified) {
    EXPECT_GT(stats.unified.prefetches, 0u);
    EXPECT_GT(stats.unified.evictions, 0u);
  }
  if (mode == Mode::kUnifiedNoHints) {
    EXPECT_EQ(stats.unified.prefetches, 0u);
    EXPECT_GT(stats.unified.faults, 0u);
  }
  if (fault_rate > 0) {
    EXPECT_GT(failures, 0u);
  }
}

TEST(StoreModelTest, RandomOperationsMatchReference) { RunModel(0); }

TEST(StoreModelTest, RandomOperationsUnderIoErrorsLoseNothing) {
  RunModel(0.02, FaultKind::kEio);
}

TEST(StoreModelTest, RandomOperationsUnderBitFlipsLoseNothing) {
  RunModel(0.02, FaultKind::kBitFlip);
}

TEST(StoreModelTest, RandomOperationsUnderShortWritesLoseNothing) {
  RunModel(0.02, FaultKind::kShortWrite);
}

TEST(StoreModelTest, UnifiedMemoryMatchesReference) {
  RunModel(0, FaultKind::kEio, Mode::kUnified);
}

TEST(StoreModelTest, UnifiedMemoryWithoutHintsMatchesReference) {
  RunModel(0, FaultKind::kEio, Mode::kUnifiedNoHints);
}

TEST(StoreModelTest, UnifiedMemoryUnderFaultsLosesNothing) {
  RunModel(0.02, FaultKind::kEio, Mode::kUnified);
}

TEST(StoreModelTest, UnifiedMemoryUnderBitFlipsLosesNothing) {
  RunModel(0.02, FaultKind::kBitFlip, Mode::kUnified);
}

}  // namespace
}  // namespace strata
