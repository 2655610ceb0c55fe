// race_test_util.h: helpers for tests that force a race through the fault
// wrappers' gates (tiers/fault/gate.h) instead of ordering it with sleeps:
// waiting for a state the store shows but signals to nobody, and a barrier
// behind every prefetch queued so far.
#ifndef STRATA_TESTS_UTIL_RACE_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_RACE_TEST_UTIL_H_

#include <functional>

#include "absl/time/time.h"
#include "strata/store.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata::testing {

// Polls `done` (yielding between calls, never sleeping) until it is true;
// false if it still is not after `timeout`. For a state that only shows,
// such as an acquire that has started to wait: an acquire holds the store's
// lock from the moment it is observed (Stats::scheduler.accesses) until it
// first waits, so once GetStats() shows it, the acquire is waiting or done.
bool WaitUntil(const std::function<bool()>& done,
               absl::Duration timeout = absl::Seconds(60));

// Acquires the store has observed so far (see WaitUntil).
uint64_t AcquiresObserved(const Store& store);

// Returns, on Wait(), once every prefetch queued before the call has run,
// on a store with one prefetch thread (set SchedulerOptions::prefetch_threads
// = 1: its prefetches run in the order they were queued; the automatic
// default runs small ones together). Wait()
// queues one more, of a 4 KiB marker tensor from NVMe to host memory, and
// returns once that prefetch's NVMe read is held at the FaultyBlockIo gate
// (then lets it go): everything queued before it has finished. So the
// prefetches it waits for must not read NVMe themselves (keep their tensors'
// contents in host memory), or the gate would hold one of theirs; Wait()
// checks the read it held is the marker's and fails the test if not. The
// marker adds one prefetch (issued, and wasted when the next Wait drops it)
// and 4 KiB of host memory to the store's counts.
class PrefetchBarrier {
 public:
  // Creates the marker in `store`; `io` is the store's block-I/O wrapper.
  PrefetchBarrier(Store* store, FaultyBlockIo* io);
  PrefetchBarrier(const PrefetchBarrier&) = delete;
  PrefetchBarrier& operator=(const PrefetchBarrier&) = delete;

  void Wait();

 private:
  Store* const store_;
  FaultyBlockIo* const io_;
  TensorId marker_;
};

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_RACE_TEST_UTIL_H_
