// watchdog.h: Watchdog, a deadline for a call that cannot time out itself.
//
// MPI_Init and MPI_Finalize block until every rank arrives; a rank stopped
// or stuck before them would hang the others forever, whatever
// --collective-timeout says. A Watchdog armed around such a call runs its
// action on a thread of its own once the deadline passes (strata's: say so
// and end the process); destroying it first disarms it.
#ifndef STRATA_BASE_WATCHDOG_H_
#define STRATA_BASE_WATCHDOG_H_

#include <functional>
#include <thread>

#include "base/sync.h"

namespace strata {

class Watchdog {
 public:
  // Runs `on_timeout` after `seconds` (> 0) unless destroyed before.
  Watchdog(double seconds, std::function<void()> on_timeout);
  // Disarms; waits for `on_timeout` if it has started.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void Run(double seconds, const std::function<void()>& on_timeout);

  Mutex mu_;
  CondVar disarmed_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace strata

#endif  // STRATA_BASE_WATCHDOG_H_
