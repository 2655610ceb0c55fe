// host_pool.h: HostPool, a fixed set of threads for host-side elementwise work
// (the optimizer's update today; casts, gradient accumulation and norms are
// meant to use it too), and HostThreads, how many cores strata may use.
//
// A job splits [0, n) into contiguous ranges, one per thread, the first run
// by the caller: each thread touches one stretch of memory, and the same
// index range goes to the same worker on every call, so pages first touched
// by a worker stay near it. Threads are started once, in the constructor, and
// sleep on a condition variable between jobs: a call creates no thread. Jobs
// too small to split run on the caller alone and never touch the pool's
// lock.
#ifndef STRATA_TRAIN_HOST_POOL_H_
#define STRATA_TRAIN_HOST_POOL_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "base/sync.h"

namespace strata::train {

// The cores strata may use: STRATA_HOST_THREADS if set to a positive number,
// else the CPUs in this process's affinity mask (sched_getaffinity), else
// std::thread::hardware_concurrency; at least 1.
int HostThreads();

// Thread-safe: any thread may call ParallelFor. One job runs at a time; a
// caller that finds the pool busy (another caller's job, or its own job
// calling ParallelFor from inside) runs its whole range on its own thread
// instead of waiting, so nested and concurrent calls cannot deadlock.
class HostPool {
 public:
  using RangeFn = absl::FunctionRef<void(int64_t begin, int64_t end)>;

  // A pool of `threads` threads in all, the caller's included: threads - 1
  // workers start here and live until the destructor. threads < 1 counts
  // as 1 (no workers: every job runs on its caller).
  explicit HostPool(int threads);
  // Stops and joins the workers. No ParallelFor may be running.
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // The process's pool, HostThreads() threads, started on first use and
  // never destroyed (its workers sleep until the process exits).
  static HostPool& Shared();

  int threads() const { return threads_; }

  // Runs fn(begin, end) over contiguous ranges that cover [0, n) once and
  // returns when every range has finished. Uses min(threads(),
  // n / min_elements) ranges (at least one: n < 2 * min_elements runs on the
  // caller alone); every split point is a multiple of `align` (>= 1), so
  // ranges start on whole cache lines or vectors when the data does. The
  // split depends only on n, min_elements, align and threads(), never on
  // timing. fn must not throw. n <= 0 does nothing.
  void ParallelFor(int64_t n, int64_t min_elements, int64_t align, RangeFn fn);

  // Jobs run split since construction (for tests: a job too small to split,
  // or one run inline because the pool was busy, does not count).
  int64_t split_jobs() const;

 private:
  struct Worker {
    CondVar wake;  // signalled when a job includes this worker, or on stop
    std::thread thread;
  };

  // Worker workers_[index - 1]'s life: wait for a job that includes range
  // `index`, run it, repeat until stop_.
  void WorkerLoop(int index);

  // Constant after construction.
  const int threads_;
  std::vector<std::unique_ptr<Worker>> workers_;  // index i runs range i + 1

  mutable Mutex mu_;
  CondVar done_;  // signalled when pending_ reaches 0
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;        // a job is running
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped per job
  int ranges_ ABSL_GUARDED_BY(mu_) = 0;           // in the current job
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // workers still on their range
  const RangeFn* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  // split_[i] .. split_[i + 1] is range i; threads_ + 1 entries.
  std::vector<int64_t> split_ ABSL_GUARDED_BY(mu_);
  int64_t split_jobs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_HOST_POOL_H_
