// sim_copy_engine.h: SimCopyEngine, one copy engine of the simulated device
// (one per direction).
//
// Policy: one thread serves every queued copy one chunk at a time, round
// robin, so a small copy waits for at most one chunk of each copy queued
// before it. With a link model (link_gbps > 0) a chunk of n bytes occupies the
// link for at least n / (link_gbps * 1e9) seconds: the engine copies the chunk
// with memcpy, then sleeps until the modelled finish time. The link keeps its
// own clock while busy, so sleep overshoot does not accumulate: n bytes take
// at least n / (link_gbps * 1e9) seconds less 2 ms of slack. Each copy
// additionally waits latency_seconds once after its last chunk (the link is
// free meanwhile, as with a pipelined DMA). Time is read and waited for on a
// Clock (base/clock.h): the real one, or a test's FakeClock, which makes the
// modelled time exact and the order of chunks deterministic.
//
// Thread safety: Copy may be called concurrently from any number of threads.
#ifndef STRATA_TIERS_DEVICE_SIM_COPY_ENGINE_H_
#define STRATA_TIERS_DEVICE_SIM_COPY_ENGINE_H_

#include <cstdint>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/sync.h"

namespace strata {

class SimCopyEngine {
 public:
  // `chunk_bytes` > 0; `link_gbps` 0 disables the link model. `clock` (not
  // owned, outlives the engine) times the link model. Starts the engine
  // thread.
  SimCopyEngine(uint64_t chunk_bytes, double link_gbps, double latency_seconds,
                Clock* clock = &Clock::Real());
  ~SimCopyEngine();  // Shutdown()
  SimCopyEngine(const SimCopyEngine&) = delete;
  SimCopyEngine& operator=(const SimCopyEngine&) = delete;

  // Copies `bytes` from `src` to `dst` and returns when done.
  // FailedPrecondition after Shutdown.
  absl::Status Copy(void* dst, const void* src, uint64_t bytes);

  // Serves the copies already queued, then stops and joins the thread.
  // Idempotent.
  void Shutdown();

  // Copies waiting for their next chunk, not counting the one being served
  // (a test's way to know a copy is queued).
  int queued() const;

 private:
  struct Job {
    std::byte* dst;
    const std::byte* src;
    uint64_t bytes;
    uint64_t done = 0;  // touched only by the engine thread
  };

  void Run();
  // Copies the next chunk of `job` and waits out the link model.
  void ServeChunk(Job& job);
  bool HasWorkOrStopping() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }

  // Constant after construction.
  const uint64_t chunk_bytes_;
  const double link_gbps_;
  const absl::Duration latency_;
  Clock* const clock_;

  // Engine thread only.
  absl::Time link_free_at_ = absl::InfinitePast();

  mutable Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  // Jobs whose last chunk is copied; their callers take them out and return.
  absl::flat_hash_set<const Job*> finished_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // started last, joined by Shutdown
};

}  // namespace strata

#endif  // STRATA_TIERS_DEVICE_SIM_COPY_ENGINE_H_
