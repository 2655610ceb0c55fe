#include "src/extent_allocator.h"

#include <cassert>

namespace strata {

ExtentAllocator::ExtentAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity / alignment * alignment), alignment_(alignment) {
  assert(alignment > 0 && (alignment & (alignment - 1)) == 0);
  if (capacity_ > 0) InsertFree(0, capacity_);
}

uint64_t ExtentAllocator::RoundUp(uint64_t bytes) const {
  return (bytes + alignment_ - 1) / alignment_ * alignment_;
}

std::optional<std::pair<uint64_t, uint64_t>> ExtentAllocator::FindRange(
    uint64_t want, Placement placement) const {
  switch (placement) {
    case Placement::kBestFit: {
      // The first (smallest, then lowest offset) free range >= want.
      auto fit = free_by_size_.lower_bound({want, 0});
      if (fit == free_by_size_.end()) return std::nullopt;
      return std::make_pair(fit->second, fit->first);
    }
    case Placement::kLow:
      for (const auto& [offset, size] : free_by_offset_) {
        if (size >= want) return std::make_pair(offset, size);
      }
      return std::nullopt;
    case Placement::kHigh:
      for (auto it = free_by_offset_.rbegin(); it != free_by_offset_.rend();
           ++it) {
        if (it->second >= want) return std::make_pair(it->first, it->second);
      }
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Extent> ExtentAllocator::Allocate(uint64_t bytes,
                                                Placement placement) {
  if (bytes == 0 || bytes > capacity_) return std::nullopt;
  const uint64_t want = RoundUp(bytes);
  const auto range = FindRange(want, placement);
  if (!range) return std::nullopt;
  const auto [offset, size] = *range;
  EraseFree(free_by_offset_.find(offset));
  uint64_t at = offset;
  if (placement == Placement::kHigh) {
    at = offset + size - want;
    if (size > want) InsertFree(offset, size - want);
  } else if (size > want) {
    InsertFree(offset + want, size - want);
  }
  used_ += want;
  if (used_ > peak_) peak_ = used_;
  ++allocations_;
  return Extent{at, want};
}

bool ExtentAllocator::AllocateAt(const Extent& extent) {
  if (extent.bytes == 0 || extent.offset % alignment_ != 0 ||
      extent.bytes % alignment_ != 0) {
    return false;
  }
  auto it = free_by_offset_.upper_bound(extent.offset);
  if (it == free_by_offset_.begin()) return false;
  --it;
  const auto [offset, size] = *it;
  if (extent.offset + extent.bytes > offset + size) return false;
  EraseFree(it);
  if (extent.offset > offset) InsertFree(offset, extent.offset - offset);
  const uint64_t end = extent.offset + extent.bytes;
  if (offset + size > end) InsertFree(end, offset + size - end);
  used_ += extent.bytes;
  if (used_ > peak_) peak_ = used_;
  ++allocations_;
  return true;
}

void ExtentAllocator::Free(const Extent& extent) {
  assert(extent.bytes > 0 && extent.offset + extent.bytes <= capacity_);
  uint64_t offset = extent.offset;
  uint64_t bytes = extent.bytes;
  // Coalesce with the free neighbour after, then the one before.
  auto next = free_by_offset_.lower_bound(offset);
  assert(next == free_by_offset_.end() || next->first >= offset + bytes);
  if (next != free_by_offset_.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = std::next(next);
    EraseFree(std::prev(next));
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    assert(prev->first + prev->second <= offset);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      bytes += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, bytes);
  used_ -= extent.bytes;
  ++frees_;
}

uint64_t ExtentAllocator::largest_free_bytes() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

uint64_t ExtentAllocator::FreeBytesAround(const Extent& extent) const {
  uint64_t bytes = extent.bytes;
  auto next = free_by_offset_.lower_bound(extent.offset);
  if (next != free_by_offset_.end() &&
      next->first == extent.offset + extent.bytes) {
    bytes += next->second;
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == extent.offset) bytes += prev->second;
  }
  return bytes;
}

void ExtentAllocator::InsertFree(uint64_t offset, uint64_t bytes) {
  free_by_offset_.emplace(offset, bytes);
  free_by_size_.emplace(bytes, offset);
}

void ExtentAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

}  // namespace strata
