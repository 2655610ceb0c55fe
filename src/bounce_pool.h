// bounce_pool.h: BouncePool, pinned staging chunks for NVMe<->device
// pipelines.
//
// Policy: a fixed set of chunks reserved at open (one HostArena, so pinned and
// 4 KiB-aligned for O_DIRECT, registered with io_uring), handed out in pairs:
// a pipeline reads chunk k+1 into one while chunk k is copied from the other.
// A tensor larger than the free host tier still reaches the device this way.
// Acquire blocks until a pair is free; pairs are held only by transfers in
// progress, so the wait is bounded.
//
// Thread safety: thread-safe.
#ifndef STRATA_SRC_BOUNCE_POOL_H_
#define STRATA_SRC_BOUNCE_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "tiers/host/host_arena.h"

namespace strata {

class BouncePool {
 public:
  // A held pair of chunks; returns them to the pool on destruction.
  class Pair {
   public:
    Pair(BouncePool* pool, int index) : pool_(pool), index_(index) {}
    Pair(const Pair&) = delete;
    Pair& operator=(const Pair&) = delete;
    ~Pair() { pool_->Return(index_); }
    std::byte* chunk(int i) const { return pool_->ChunkAt(index_, i); }

   private:
    BouncePool* pool_;
    int index_;
  };

  // `pairs` pairs of `chunk_bytes` (a multiple of 4096) each.
  static absl::StatusOr<std::unique_ptr<BouncePool>> Create(
      uint64_t chunk_bytes, int pairs, bool lock_memory, DeviceBackend* device);

  std::unique_ptr<Pair> Acquire();
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  // The whole reservation, for io_uring buffer registration.
  std::byte* base() const { return arena_->base(); }
  uint64_t size_bytes() const { return arena_->size_bytes(); }

 private:
  BouncePool(std::unique_ptr<HostArena> arena, uint64_t chunk_bytes, int pairs);
  std::byte* ChunkAt(int pair, int i) const {
    return arena_->base() + (2 * pair + i) * chunk_bytes_;
  }
  void Return(int index);

  const std::unique_ptr<HostArena> arena_;
  const uint64_t chunk_bytes_;
  Mutex mu_;
  std::vector<bool> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_SRC_BOUNCE_POOL_H_
