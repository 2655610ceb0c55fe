// event_reaper.h: EventReaper, the thread that waits for device events the
// store's callers must not wait for, and runs what each one's completion
// lets go (a stream-ordered acquire's host source is unpinned there).
//
// Policy: events are waited for in the order they were added (the store's
// copies complete in that order on one engine's stream), each with
// DeviceEvent::Synchronize, with no lock of the caller's held; then its
// `done` runs on the reaper's thread with Synchronize's status. A `done` may
// take the caller's locks: nothing waits for the reaper while holding one
// that `done` needs (the store waits on its condition variable, which
// releases its mutex). The destructor waits for every event added and its
// `done`, then joins the thread.
//
// Thread safety: Add may be called concurrently, and from a `done`.
#ifndef STRATA_SRC_EVENT_REAPER_H_
#define STRATA_SRC_EVENT_REAPER_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/sync.h"
#include "tiers/device/device_backend.h"

namespace strata {

class EventReaper {
 public:
  using Done = std::function<void(absl::Status)>;

  EventReaper();
  ~EventReaper();
  EventReaper(const EventReaper&) = delete;
  EventReaper& operator=(const EventReaper&) = delete;

  // Runs `done` on the reaper's thread once `event` has happened.
  void Add(std::shared_ptr<DeviceEvent> event, Done done);

 private:
  struct Pending {
    std::shared_ptr<DeviceEvent> event;
    Done done;
  };
  void Loop();

  Mutex mu_;
  CondVar added_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace strata

#endif  // STRATA_SRC_EVENT_REAPER_H_
