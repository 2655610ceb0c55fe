// sim_copy_engine.cc: the simulated device's copy engine thread (round robin
// over queued copies, chunk by chunk, with an optional link model).
#include "tiers/device/sim_copy_engine.h"

#include <algorithm>
#include <cstring>

namespace strata {

SimCopyEngine::SimCopyEngine(uint64_t chunk_bytes, double link_gbps,
                             double latency_seconds, Clock* clock)
    : chunk_bytes_(chunk_bytes),
      link_gbps_(link_gbps),
      latency_(absl::Seconds(latency_seconds)),
      clock_(clock),
      thread_([this] { Run(); }) {}

SimCopyEngine::~SimCopyEngine() { Shutdown(); }

void SimCopyEngine::Shutdown() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int SimCopyEngine::queued() const {
  MutexLock lock(&mu_);
  return static_cast<int>(queue_.size());
}

absl::Status SimCopyEngine::Copy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  Job job{static_cast<std::byte*>(dst), static_cast<const std::byte*>(src),
          bytes};
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      return absl::FailedPreconditionError(
          "simulated copy engine is shut down");
    }
    queue_.push_back(&job);
    const auto finished = [this, &job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return finished_.contains(&job);
    };
    mu_.Await(Condition(&finished));
    finished_.erase(&job);
  }
  if (latency_ > absl::ZeroDuration()) clock_->SleepFor(latency_);
  return absl::OkStatus();
}

void SimCopyEngine::Run() {
  while (true) {
    Job* job = nullptr;
    {
      MutexLock lock(&mu_);
      mu_.Await(Condition(this, &SimCopyEngine::HasWorkOrStopping));
      if (queue_.empty()) return;  // stopping, and nothing left to serve
      job = queue_.front();
      queue_.pop_front();
    }
    ServeChunk(*job);
    MutexLock lock(&mu_);
    if (job->done == job->bytes) {
      finished_.insert(job);  // the caller may free `job` once it sees this
    } else {
      queue_.push_back(job);
    }
  }
}

void SimCopyEngine::ServeChunk(Job& job) {
  // A link that was busy until just now continues on its own clock, so sleep
  // overshoot on one chunk is made up on the next (to within kBusySlack).
  constexpr absl::Duration kBusySlack = absl::Milliseconds(2);
  const absl::Time now = clock_->Now();
  const absl::Time start =
      now - link_free_at_ < kBusySlack ? link_free_at_ : now;
  const uint64_t n = std::min(chunk_bytes_, job.bytes - job.done);
  // A unified-memory prefetch "copies" a range onto itself: it only holds
  // the link (touching the bytes would race with readers of the range).
  if (job.dst != job.src) {
    std::memcpy(job.dst + job.done, job.src + job.done, n);
  }
  job.done += n;
  if (link_gbps_ <= 0) return;
  link_free_at_ =
      start + absl::Seconds(static_cast<double>(n) / (link_gbps_ * 1e9));
  clock_->SleepUntil(link_free_at_);
}

}  // namespace strata
