// sync.h: the mutex, lock, condition and condition variable strata uses, and
// MutexUnlock, a scope that runs with a held mutex released.
//
// They are absl::Mutex and friends — except in ThreadSanitizer builds
// (STRATA_TSAN, set by the tsan preset). Debian's Abseil is not built with
// -fsanitize=thread, so TSan cannot see absl::Mutex's happens-before edges and
// reports every guarded access as a race. Under STRATA_TSAN the same API
// subset is implemented on std::mutex and std::condition_variable, which TSan
// understands, so its reports are about strata's code.
#ifndef STRATA_BASE_SYNC_H_
#define STRATA_BASE_SYNC_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if !defined(STRATA_TSAN)

namespace strata {
using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using CondVar = absl::CondVar;
using Condition = absl::Condition;
}  // namespace strata

#else  // STRATA_TSAN

#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/time/time.h"

namespace strata {

// A predicate evaluated with the mutex held (absl::Condition's four forms).
class Condition {
 public:
  explicit Condition(const bool* flag) : eval_([flag] { return *flag; }) {}
  template <typename T>
  Condition(bool (*fn)(T*), T* arg) : eval_([fn, arg] { return fn(arg); }) {}
  template <typename T>
  Condition(T* obj, bool (T::*method)())
      : eval_([obj, method] { return (obj->*method)(); }) {}
  template <typename T>
  Condition(const T* obj, bool (T::*method)() const)
      : eval_([obj, method] { return (obj->*method)(); }) {}
  template <typename F>
  explicit Condition(const F* functor)
      : eval_([functor] { return (*functor)(); }) {}
  bool Eval() const { return eval_(); }

 private:
  std::function<bool()> eval_;
};

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // Wakes Await()ers so they re-evaluate their conditions, as absl does.
  // The wake comes first: once unlocked, another thread may destroy this
  // mutex (a waiter that sees its condition true and frees the object).
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    awaiters_.notify_all();
    mu_.unlock();
  }
  void Await(const Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    if (!cond.Eval()) {
      // This thread may have changed state since Lock() and now releases the
      // mutex without Unlock(): let the other waiters re-check first.
      awaiters_.notify_all();
      do {
        awaiters_.wait(lock);
      } while (!cond.Eval());
    }
    lock.release();
  }

 private:
  friend class CondVar;
  std::mutex mu_;
  std::condition_variable awaiters_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  void Wait(Mutex* mu) {
    mu->awaiters_.notify_all();  // releasing without Unlock(): see Await
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // True if `timeout` passed first, as absl::CondVar says.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
    mu->awaiters_.notify_all();  // releasing without Unlock(): see Await
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout)) ==
        std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace strata

#endif  // STRATA_TSAN

// The thread-safety analysis' own attribute names: clang models a scoped
// object that releases a capability for its lifetime only with these, not
// with absl's older unlock_function spelling.
#if defined(__clang__)
#define STRATA_RELEASE_CAPABILITY(...) \
  __attribute__((release_capability(__VA_ARGS__)))
#else
#define STRATA_RELEASE_CAPABILITY(...)
#endif

namespace strata {

// Releases `mu` (held by the caller) for the scope's lifetime and takes it
// back at the end: the one way the store runs a transfer or a copy without
// its lock, so that the lock is re-taken on every path out, and the analysis
// (-Wthread-safety) knows the guarded state may not be touched meanwhile.
// Callers re-check what they rely on after the scope: other threads ran.
//   MutexLock lock(&mu_);
//   ...
//   {
//     MutexUnlock unlocked(&mu_);
//     status = MoveBytes();  // no guarded state here
//   }
class ABSL_SCOPED_LOCKABLE MutexUnlock {
 public:
  explicit MutexUnlock(Mutex* mu) STRATA_RELEASE_CAPABILITY(mu) : mu_(mu) {
    mu_->Unlock();
  }
  ~MutexUnlock() STRATA_RELEASE_CAPABILITY() { mu_->Lock(); }
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace strata

#endif  // STRATA_BASE_SYNC_H_
