// clock.h: Clock, the seam in front of the time strata waits for on purpose
// (the simulated device's modelled link time), with the real clock and
// FakeClock, a clock a test moves by hand.
//
// Use Clock::Real() in product code unless a caller hands in another. A test
// that wants modelled time to pass deterministically hands a FakeClock to the
// code under test: every SleepUntil then parks until the test Advance()s the
// fake time past its deadline (or returns at once in auto-advance mode).
// Header-only: base/ has no library of its own.
//
// Thread safety: both clocks may be used from any number of threads.
#ifndef STRATA_BASE_CLOCK_H_
#define STRATA_BASE_CLOCK_H_

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace strata {

class Clock {
 public:
  virtual ~Clock() = default;
  // The current time.
  virtual absl::Time Now() = 0;
  // Returns once Now() >= `deadline` (at once for a deadline in the past).
  virtual void SleepUntil(absl::Time deadline) = 0;
  void SleepFor(absl::Duration d) { SleepUntil(Now() + d); }

  // The wall clock (absl::Now, absl::SleepFor). Never destroyed.
  static Clock& Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepUntil(absl::Time deadline) override {
    const absl::Duration left = deadline - absl::Now();
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
  }
};

inline Clock& Clock::Real() {
  static RealClock* const clock = new RealClock();
  return *clock;
}

// Time that moves only when told. Starts at the Unix epoch.
// Policy: with auto_advance off (the default), SleepUntil parks the caller
// until Advance or AdvanceToNextDeadline reaches its deadline; with it on,
// SleepUntil moves the time to its deadline itself and returns (time passes
// exactly as fast as the code under test asks it to).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(bool auto_advance = false) : auto_(auto_advance) {}

  absl::Time Now() override {
    MutexLock lock(&mu_);
    return now_;
  }
  void SleepUntil(absl::Time deadline) override {
    MutexLock lock(&mu_);
    if (auto_) {
      now_ = std::max(now_, deadline);
      return;
    }
    if (deadline <= now_) return;
    auto parked = deadlines_.insert(deadline);
    changed_.SignalAll();
    while (now_ < deadline) changed_.Wait(&mu_);
    deadlines_.erase(parked);
    changed_.SignalAll();
  }

  // Moves the time forward by `d` (>= 0), waking the sleepers it reaches.
  void Advance(absl::Duration d) {
    MutexLock lock(&mu_);
    now_ += std::max(d, absl::ZeroDuration());
    changed_.SignalAll();
  }
  // Moves the time to the earliest deadline a thread is parked on, waking
  // it; false (time unchanged) when none is parked.
  bool AdvanceToNextDeadline() {
    MutexLock lock(&mu_);
    const auto next = deadlines_.upper_bound(now_);
    if (next == deadlines_.end()) return false;
    now_ = *next;
    changed_.SignalAll();
    return true;
  }
  // Blocks until `n` threads are parked in SleepUntil on deadlines not yet
  // reached (one woken by Advance but not yet run no longer counts).
  void WaitForSleepers(int n) {
    MutexLock lock(&mu_);
    while (Parked() < n) changed_.Wait(&mu_);
  }
  // Threads parked in SleepUntil on deadlines not yet reached.
  int sleepers() {
    MutexLock lock(&mu_);
    return Parked();
  }

 private:
  int Parked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(
        std::distance(deadlines_.upper_bound(now_), deadlines_.end()));
  }

  const bool auto_;
  Mutex mu_;
  CondVar changed_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  std::multiset<absl::Time> deadlines_ ABSL_GUARDED_BY(mu_);  // parked
};

}  // namespace strata

#endif  // STRATA_BASE_CLOCK_H_
