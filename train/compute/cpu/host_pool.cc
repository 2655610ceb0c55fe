// host_pool.cc: HostPool (see host_pool.h).
//
// One mutex guards the job; each worker waits on its own condition variable,
// so a job of k ranges wakes only the k - 1 workers it needs. A job is a
// generation number: a worker that wakes to a new generation whose ranges
// include its index, while the job is still open, checks in (active_), runs
// chunks without the lock, and checks out. The caller runs chunks too, and
// once no chunk is left to claim it closes the job (late workers no longer
// check in: they would find nothing to do) and waits only for the workers
// that checked in, each finishing the chunk it holds. Chunks are claimed
// with an atomic fetch_add on their range's cursor, so each runs once.
#include "train/compute/cpu/host_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace strata::train {
namespace {

// The start of chunk c of `chunks` over [0, n), cut at multiples of align;
// Cut(chunks) = n.
int64_t Cut(int64_t n, int64_t align, int chunks, int c) {
  if (c >= chunks) return n;
  const int64_t exact = n / chunks * c + n % chunks * c / chunks;
  return exact / align * align;
}

}  // namespace

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
    : threads_(std::max(1, threads)), cursors_(new std::atomic<int>[threads_]) {
  for (int r = 0; r < threads_; ++r) cursors_[r].store(0);
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

void HostPool::RunChunks(const Job& job, int home) {
  const int per_range = job.chunks / job.ranges;
  for (int k = 0; k < job.ranges; ++k) {
    const int r = (home + k) % job.ranges;
    const int last = (r + 1) * per_range;
    for (;;) {
      const int c = cursors_[r].fetch_add(1, std::memory_order_relaxed);
      if (c >= last) break;
      const int64_t begin = Cut(job.n, job.align, job.chunks, c);
      const int64_t end = Cut(job.n, job.align, job.chunks, c + 1);
      if (begin < end) (*job.fn)(begin, end);
    }
  }
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
  Job job{.fn = &fn, .n = n, .align = align, .ranges = ranges};
  job.chunks = ranges * static_cast<int>(std::min<int64_t>(
                            kChunksPerRange, std::max<int64_t>(1, n / ranges)));
  {
    MutexLock lock(&mu_);
    if (busy_) {
      job.ranges = 0;  // another job holds the workers: all of it here
    } else {
      busy_ = true;
      open_ = true;
      ++split_jobs_;
      ++generation_;
      job_ = job;
      const int per_range = job.chunks / ranges;
      for (int r = 0; r < ranges; ++r) {
        cursors_[r].store(r * per_range, std::memory_order_relaxed);
      }
    }
  }
  if (job.ranges == 0) {
    fn(0, n);
    return;
  }
  // Signalled without the lock, so a woken worker can check in at once. No
  // wake-up is lost: a worker either saw the new generation under the lock
  // or is waiting on its condition variable.
  for (int i = 1; i < ranges; ++i) workers_[i - 1]->wake.Signal();
  RunChunks(job, 0);
  MutexLock lock(&mu_);
  open_ = false;  // every chunk is claimed: late workers need not come
  while (active_ > 0) done_.Wait(&mu_);
  job_ = Job{};
  busy_ = false;
}

void HostPool::WorkerLoop(int index) {
  Worker& self = *workers_[index - 1];
  uint64_t seen = 0;
  MutexLock lock(&mu_);
  while (!stop_) {
    if (generation_ != seen) {
      seen = generation_;
      if (open_ && index < job_.ranges) {
        const Job job = job_;
        ++active_;
        {
          MutexUnlock unlocked(&mu_);
          RunChunks(job, index);
        }
        if (--active_ == 0) done_.Signal();
        continue;
      }
    }
    self.wake.Wait(&mu_);
  }
}

}  // namespace strata::train
