// break_test_util.cc: the adversarial Store tests' shared helpers.
#include "tests/util/break_test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "src/store_open.h"

namespace strata::testing {
namespace {

// Failed parts of the running test's result so far.
int FailedParts() {
  const ::testing::TestResult* r =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) {
    if (r->GetTestPartResult(i).failed()) ++n;
  }
  return n;
}

}  // namespace

void RunIsolated(int timeout_s, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    // Failures recorded before the fork (earlier bodies of the same test)
    // are not this body's.
    const int before = FailedParts();
    alarm(static_cast<unsigned>(timeout_s));
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(FailedParts() > before ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM) {
      ADD_FAILURE() << "HANG: the test body did not finish within " << timeout_s
                    << " s (deadlock or lost wake-up)";
    } else {
      ADD_FAILURE() << "CRASH: the test body died with signal " << sig << " ("
                    << strsignal(sig) << ")";
    }
  } else if (WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << "the isolated body reported failures (see above)";
  }
}

BreakEnv::BreakEnv(uint64_t device_bytes, uint64_t host_bytes,
                   uint64_t nvme_bytes,
                   const std::function<void(StoreOptions&)>& tweak) {
  StoreOptions o =
      SmallStoreOptions(dir.path(), device_bytes, host_bytes, nvme_bytes);
  // The breakers drive the store's own error paths: each injected fault
  // must reach it, not be retried away below it.
  o.nvme.io_attempts = 1;
  if (tweak) tweak(o);
  StoreSeams seams;
  seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
    auto f = std::make_unique<FaultyDevice>(std::move(d));
    device = f.get();
    return f;
  };
  seams.wrap_block_io = [this](std::unique_ptr<BlockIo> b) {
    auto f = std::make_unique<FaultyBlockIo>(std::move(b), FaultSpec{});
    io = f.get();
    return f;
  };
  auto s = OpenStore(o, seams);
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) store = std::move(*s);
}

void BreakEnv::NoFaults() {
  if (device) device->set_spec({});
  if (io) io->set_spec({});
}

TensorId BreakEnv::Make(uint64_t size, Tier home, const std::string& name) {
  auto id = store->Create({.name = name, .size_bytes = size, .home = home});
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : TensorId{};
}

bool BreakEnv::Holds(TensorId id, uint64_t size, uint64_t seed) {
  std::vector<std::byte> out(size);
  absl::Status s = store->Read(id, out.data(), size);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() && MatchesPattern(out.data(), size, seed);
}

void BreakEnv::ExpectNoSpaceHeld() {
  Stats st = store->GetStats();
  for (int t = 0; t < kNumTiers; ++t) {
    EXPECT_EQ(st.tiers[t].used_bytes, 0u)
        << "leaked extents on " << TierName(static_cast<Tier>(t));
    EXPECT_EQ(st.tiers[t].leased_bytes, 0u)
        << "leased bytes left on " << TierName(static_cast<Tier>(t));
    EXPECT_EQ(st.tiers[t].allocations, st.tiers[t].frees)
        << TierName(static_cast<Tier>(t));
  }
  EXPECT_EQ(st.tensors, 0u);
}

void FillTagged(void* p, uint64_t size, uint64_t seed) {
  std::memcpy(p, &seed, 8);
  FillPattern(static_cast<std::byte*>(p) + 8, size - 8, seed);
}

bool Consistent(const void* p, uint64_t size) {
  const auto* b = static_cast<const std::byte*>(p);
  uint64_t seed;
  std::memcpy(&seed, b, 8);
  if (seed == 0) {
    for (uint64_t i = 0; i < size; ++i) {
      if (b[i] != std::byte{0}) return false;
    }
    return true;
  }
  return MatchesPattern(b + 8, size - 8, seed);
}

}  // namespace strata::testing
