// break_test_util.h: what the adversarial Store tests (tests/break_*_test.cc)
// share: a forked, deadline-bound runner for bodies that could crash or
// hang; a store with fault injectors in both seams; self-describing tensor
// contents that show a torn write.
//
// The tests check the Store contract (include/strata/store.h): misuse gives
// a clear absl::Status (never a crash), a failed transfer leaves the last
// valid copy intact, concurrent use never hangs, and tier space comes back
// once every tensor is destroyed. Tests marked "Regression" failed when they
// were written; their comment says what went wrong and what must happen
// instead.
#ifndef STRATA_TESTS_UTIL_BREAK_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_BREAK_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "strata/options.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/fault/faulty_device.h"

namespace strata::testing {

// Runs `body` in a forked child that must finish within `timeout_s` seconds.
// A signal (crash, abort) or the deadline (hang, deadlock) fails the test;
// gtest failures inside the child are printed by the child and fail it too.
// A crash or a hang so shows up as a failure of that one test, not as a
// stuck or aborted run. Bodies open their own store inside the child (a
// store's threads do not survive fork).
void RunIsolated(int timeout_s, const std::function<void()>& body);

// A store on the simulated device with an NVMe tier in a private directory,
// with fault injectors (and their gates) in both seams.
struct BreakEnv {
  // Budgets in bytes; `tweak` may change the options before Open.
  explicit BreakEnv(uint64_t device_bytes = 4 * kMiB,
                    uint64_t host_bytes = 4 * kMiB,
                    uint64_t nvme_bytes = 32 * kMiB,
                    const std::function<void(StoreOptions&)>& tweak = {});

  // Turns every injected fault off.
  void NoFaults();
  // Creates a tensor of `size` bytes (EXPECTs success).
  TensorId Make(uint64_t size, Tier home = Tier::kNvme,
                const std::string& name = "t");
  // Whether the tensor reads back as Pattern(size, seed).
  bool Holds(TensorId id, uint64_t size, uint64_t seed);
  // EXPECTs no extent, lease or tensor is left on any tier.
  void ExpectNoSpaceHeld();

  TempDir dir;
  FaultyDevice* device = nullptr;  // owned by the store
  FaultyBlockIo* io = nullptr;     // owned by the store
  std::unique_ptr<Store> store;
};

// Self-describing contents: the first 8 bytes hold a seed, the rest is
// Pattern(size - 8, seed). Any whole write leaves such contents; a torn one
// does not.
void FillTagged(void* p, uint64_t size, uint64_t seed);
// True for tagged contents or all zeros (a kWrite of an empty tensor).
bool Consistent(const void* p, uint64_t size);

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_BREAK_TEST_UTIL_H_
