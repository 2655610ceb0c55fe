// host_pool.cc: HostPool (see host_pool.h).
//
// One mutex guards the job; each worker waits on its own condition variable,
// so a job of k ranges wakes exactly the k - 1 workers it needs. A job is a
// generation number: a worker runs range `index` of every generation whose
// range count exceeds its index, and the caller waits until each of them has
// counted itself done. The caller holds no lock while any range runs.
#include "train/host_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace strata::train {

int HostThreads() {
  if (const char* env = std::getenv("STRATA_HOST_THREADS")) {
    const int asked = std::atoi(env);
    if (asked > 0) return asked;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int count = CPU_COUNT(&set);
    if (count > 0) return count;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

HostPool::HostPool(int threads)
    : threads_(std::max(1, threads)), split_(threads_ + 1, 0) {
  workers_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) {
    workers_.push_back(std::make_unique<Worker>());
  }
  // Started only once every Worker exists: a worker reads its own slot.
  for (int i = 1; i < threads_; ++i) {
    workers_[i - 1]->thread = std::thread(&HostPool::WorkerLoop, this, i);
    const std::string name = "strata-host-" + std::to_string(i);
    pthread_setname_np(workers_[i - 1]->thread.native_handle(), name.c_str());
  }
}

HostPool::~HostPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    for (auto& w : workers_) w->wake.Signal();
  }
  for (auto& w : workers_) w->thread.join();
}

HostPool& HostPool::Shared() {
  static HostPool* const pool = new HostPool(HostThreads());
  return *pool;
}

int64_t HostPool::split_jobs() const {
  MutexLock lock(&mu_);
  return split_jobs_;
}

void HostPool::ParallelFor(int64_t n, int64_t min_elements, int64_t align,
                           RangeFn fn) {
  if (n <= 0) return;
  min_elements = std::max<int64_t>(1, min_elements);
  align = std::max<int64_t>(1, align);
  const int ranges =
      static_cast<int>(std::min<int64_t>(threads_, n / min_elements));
  if (ranges <= 1) {
    fn(0, n);
    return;
  }
  int64_t first_end = n;  // if the pool is busy: all of it here
  bool split = false;
  {
    MutexLock lock(&mu_);
    if (!busy_) {
      split = true;
      busy_ = true;
      ++split_jobs_;
      ++generation_;
      ranges_ = ranges;
      pending_ = ranges - 1;
      fn_ = &fn;
      split_[0] = 0;
      for (int i = 1; i < ranges; ++i) {
        split_[i] = (n / ranges * i + n % ranges * i / ranges) / align * align;
      }
      split_[ranges] = n;
      first_end = split_[1];
      for (int i = 1; i < ranges; ++i) workers_[i - 1]->wake.Signal();
    }
  }
  if (first_end > 0) fn(0, first_end);
  if (!split) return;
  MutexLock lock(&mu_);
  while (pending_ > 0) done_.Wait(&mu_);
  fn_ = nullptr;
  busy_ = false;
}

void HostPool::WorkerLoop(int index) {
  Worker& self = *workers_[index - 1];
  uint64_t seen = 0;
  MutexLock lock(&mu_);
  while (!stop_) {
    if (generation_ != seen) {
      seen = generation_;
      if (index < ranges_) {
        const RangeFn* fn = fn_;
        const int64_t begin = split_[index];
        const int64_t end = split_[index + 1];
        {
          MutexUnlock unlocked(&mu_);
          if (begin < end) (*fn)(begin, end);
        }
        if (--pending_ == 0) done_.Signal();
        continue;
      }
    }
    self.wake.Wait(&mu_);
  }
}

}  // namespace strata::train
