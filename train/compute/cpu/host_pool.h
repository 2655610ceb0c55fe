// host_pool.h: HostPool, a fixed set of threads for host-side elementwise work
// (the optimizer's update today; casts, gradient accumulation and norms are
// meant to use it too), and HostThreads, how many cores strata may use.
//
// A job splits [0, n) into one contiguous range per thread, the first for the
// caller, and each range into a few chunks. A thread runs its own range's
// chunks in order, so on an idle machine each thread touches one stretch of
// memory, and the same stretch on every call (pages first touched by a worker
// stay near it). A thread that finishes early takes over chunks of a range
// whose thread has not reached them, so a worker that the OS has not
// scheduled yet (a machine busy with other work) delays the job by at most
// the chunk it is running, never by its whole range. Threads start once, in
// the constructor, and sleep on a condition variable between jobs: a call
// creates no thread. Jobs too small to split run on the caller alone and
// never touch the pool's lock.
#ifndef STRATA_TRAIN_COMPUTE_CPU_HOST_POOL_H_
#define STRATA_TRAIN_COMPUTE_CPU_HOST_POOL_H_

#include <atomic>
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

  // Chunks per thread's range: what a thread that finishes early can take
  // over from one that has not started.
  static constexpr int kChunksPerRange = 8;

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

  // Runs fn(begin, end) over contiguous pieces that cover [0, n) once and
  // returns when every piece has finished. The work is split over
  // min(threads(), n / min_elements) threads (n < 2 * min_elements runs on
  // the caller alone, as one piece); each thread's range is cut into up to
  // kChunksPerRange pieces. Every cut is a multiple of `align` (>= 1), so
  // pieces start on whole cache lines or vectors when the data does; the
  // cuts depend only on n, min_elements, align and threads(), never on
  // timing (which thread runs a piece does). fn must not throw. n <= 0 does
  // nothing.
  void ParallelFor(int64_t n, int64_t min_elements, int64_t align, RangeFn fn);

  // Jobs run split since construction (for tests: a job too small to split,
  // or one run inline because the pool was busy, does not count).
  int64_t split_jobs() const;

 private:
  struct Worker {
    CondVar wake;  // signalled when a job includes this worker, or on stop
    std::thread thread;
  };
  // What a thread needs to run its share of a job; copied under mu_.
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0;
    int64_t align = 1;
    int ranges = 0;
    int chunks = 0;  // in all: ranges * chunks per range
  };

  // Worker workers_[index - 1]'s life: wait for a job that includes range
  // `index`, run its share, repeat until stop_.
  void WorkerLoop(int index);
  // Runs the unclaimed chunks of range `home`, then those of the others.
  void RunChunks(const Job& job, int home);

  // Constant after construction.
  const int threads_;
  std::vector<std::unique_ptr<Worker>> workers_;  // index i runs range i + 1
  // cursors_[r]: the next chunk of range r to claim. Reset by the poster
  // while no thread runs a job; claimed with fetch_add by checked-in threads.
  std::unique_ptr<std::atomic<int>[]> cursors_;

  mutable Mutex mu_;
  CondVar done_;  // signalled when active_ falls to 0
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // a job is running
  // Workers may check in to the current job (the caller has not finished
  // every chunk yet).
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped per job
  Job job_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // workers checked in to the job
  int64_t split_jobs_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_HOST_POOL_H_
