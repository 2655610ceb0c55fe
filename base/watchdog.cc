// watchdog.cc: see watchdog.h.
#include "base/watchdog.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace strata {

Watchdog::Watchdog(double seconds, std::function<void()> on_timeout)
    : thread_([this, seconds, f = std::move(on_timeout)] { Run(seconds, f); }) {
}

Watchdog::~Watchdog() {
  {
    MutexLock lock(&mu_);
    done_ = true;
    disarmed_.SignalAll();
  }
  thread_.join();
}

void Watchdog::Run(double seconds, const std::function<void()>& on_timeout) {
  const absl::Time deadline = absl::Now() + absl::Seconds(seconds);
  {
    MutexLock lock(&mu_);
    while (!done_) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) break;
      disarmed_.WaitWithTimeout(&mu_, left);
    }
    if (done_) return;
  }
  on_timeout();
}

}  // namespace strata
