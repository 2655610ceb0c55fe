// event_reaper.cc: see event_reaper.h.
#include "src/event_reaper.h"

namespace strata {

EventReaper::EventReaper() : thread_([this] { Loop(); }) {}

EventReaper::~EventReaper() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    added_.SignalAll();
  }
  thread_.join();
}

void EventReaper::Add(std::shared_ptr<DeviceEvent> event, Done done) {
  MutexLock lock(&mu_);
  pending_.push_back({std::move(event), std::move(done)});
  added_.SignalAll();
}

void EventReaper::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (pending_.empty() && !stopping_) added_.Wait(&mu_);
    if (pending_.empty()) return;  // stopping, and everything added ran
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    MutexUnlock unlocked(&mu_);
    next.done(next.event->Synchronize());
  }
}

}  // namespace strata
