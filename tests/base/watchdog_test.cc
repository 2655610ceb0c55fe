// watchdog_test.cc: Watchdog fires after its deadline unless disarmed.
#include "base/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace strata {
namespace {

TEST(WatchdogTest, FiresOnceTheDeadlinePasses) {
  absl::Notification fired;
  Watchdog w(0.01, [&] { fired.Notify(); });
  EXPECT_TRUE(fired.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(WatchdogTest, DisarmedBeforeTheDeadlineNeverFires) {
  std::atomic<bool> fired = false;
  {
    Watchdog w(3600, [&] { fired = true; });
  }  // joined: it cannot fire later
  EXPECT_FALSE(fired);
}

}  // namespace
}  // namespace strata
