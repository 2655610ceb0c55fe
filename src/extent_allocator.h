// extent_allocator.h: ExtentAllocator, the one sub-allocator behind all three
// tier arenas.
//
// Policy: best fit (the smallest free range that holds the request, lowest
// offset on ties) by default, or packed against one end of the arena (the
// lowest or highest free range that fits), so that tensors of different
// lifetimes gather at opposite ends instead of splitting each other's free
// space; sizes rounded up to the tier's alignment (4 KiB for host and
// NVMe so extents can feed O_DIRECT; 256 B for device), and immediate
// coalescing of a freed range with its free neighbours. Counters
// (used/peak/allocations/frees) feed Stats.
//
// Thread safety: none; the store guards it with its mutex.
#ifndef STRATA_SRC_EXTENT_ALLOCATOR_H_
#define STRATA_SRC_EXTENT_ALLOCATOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace strata {

// Where Allocate places a request.
enum class Placement : uint8_t {
  kBestFit,  // the smallest free range that fits
  kLow,      // the lowest-offset free range that fits, at its bottom
  kHigh,     // the highest-offset free range that fits, at its top
};

struct Extent {
  uint64_t offset = 0;  // bytes from the arena base
  uint64_t bytes = 0;   // rounded size actually reserved
};

class ExtentAllocator {
 public:
  // `alignment` must be a power of two; `capacity` is rounded down to it.
  ExtentAllocator(uint64_t capacity, uint64_t alignment);

  // Reserves at least `bytes` (> 0). nullopt when no free range fits.
  std::optional<Extent> Allocate(uint64_t bytes,
                                 Placement placement = Placement::kBestFit);
  // Reserves exactly `extent` (aligned), which must lie in one free range;
  // false (nothing changes) when it does not.
  bool AllocateAt(const Extent& extent);
  // Returns an extent from Allocate or AllocateAt. Freeing anything else is a
  // bug (checked with assert in debug builds).
  void Free(const Extent& extent);

  // `bytes` rounded up to the alignment.
  uint64_t RoundUp(uint64_t bytes) const;

  uint64_t capacity() const { return capacity_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t used_bytes() const { return used_; }
  uint64_t peak_used_bytes() const { return peak_; }
  uint64_t largest_free_bytes() const;
  // Bytes of the free range that freeing `extent` (allocated) would leave:
  // its own and its free neighbours'.
  uint64_t FreeBytesAround(const Extent& extent) const;
  // The free ranges, (offset, bytes) in offset order.
  const std::map<uint64_t, uint64_t>& free_ranges() const {
    return free_by_offset_;
  }
  uint64_t allocations() const { return allocations_; }
  uint64_t frees() const { return frees_; }

 private:
  // The free range (offset, size) Allocate takes `want` bytes from.
  std::optional<std::pair<uint64_t, uint64_t>> FindRange(
      uint64_t want, Placement placement) const;
  void InsertFree(uint64_t offset, uint64_t bytes);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  const uint64_t capacity_;
  const uint64_t alignment_;
  std::map<uint64_t, uint64_t> free_by_offset_;           // offset -> bytes
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (bytes, offset)
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  uint64_t allocations_ = 0;
  uint64_t frees_ = 0;
};

}  // namespace strata

#endif  // STRATA_SRC_EXTENT_ALLOCATOR_H_
