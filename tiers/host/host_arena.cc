// host_arena.cc: HostArena, the pinned host tier's one reservation (policy in
// host_arena.h): one anonymous private mapping, over-mapped by 2 MiB and
// trimmed so the base is 2 MiB-aligned for transparent huge pages.
#include "tiers/host/host_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/system_info.h"
#include "strata/status.h"

namespace strata {
namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;  // 2 MiB

uint64_t RoundUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Maps `bytes` (a multiple of 4 KiB) at a 2 MiB-aligned address.
absl::StatusOr<std::byte*> MapAligned(uint64_t bytes) {
  const uint64_t map_bytes = bytes + kHugePageBytes;
  void* raw = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    const int err = errno;
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot map a host budget of ", bytes, " bytes: ",
        absl::ErrnoToStatus(err, "mmap").message(), ": lower --host-budget"));
  }
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, kHugePageBytes);
  // Trim the unaligned head and the unused tail (both page multiples).
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = aligned + bytes;
  const uintptr_t end = start + map_bytes;
  if (end > tail) munmap(reinterpret_cast<void*>(tail), end - tail);
  return reinterpret_cast<std::byte*>(aligned);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostArena>> HostArena::Create(
    uint64_t bytes, bool lock_memory, DeviceBackend* device) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("host budget must be > 0 bytes");
  }
  const uint64_t physical = PhysicalMemoryBytes();
  if (physical != 0 && bytes > physical) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "host budget ", bytes, " bytes exceeds this machine's physical memory ",
        physical, " bytes: lower --host-budget"));
  }
  const uint64_t size = RoundUp(bytes, kPageBytes);
  STRATA_ASSIGN_OR_RETURN(std::byte * base, MapAligned(size));
  std::unique_ptr<HostArena> arena(new HostArena());
  arena->base_ = base;
  arena->size_ = size;
  arena->map_bytes_ = size;
  // Best effort: huge pages cut TLB misses; without THP this just fails.
  madvise(base, size, MADV_HUGEPAGE);
  if (lock_memory) arena->locked_ = mlock(base, size) == 0;
  if (device != nullptr && !device->is_simulated()) {
    // On failure the destructor unlocks and unmaps.
    STRATA_RETURN_IF_ERROR(device->RegisterHost(base, size));
    arena->registered_ = true;
    arena->device_ = device;
  }
  return arena;
}

std::unique_ptr<HostArena> HostArena::Managed(std::byte* base, uint64_t bytes) {
  std::unique_ptr<HostArena> arena(new HostArena());
  arena->base_ = base;
  arena->size_ = bytes;
  arena->managed_ = true;
  return arena;
}

HostArena::~HostArena() {
  if (base_ == nullptr || managed_) return;
  if (registered_) (void)device_->UnregisterHost(base_, size_);
  if (locked_) munlock(base_, size_);
  munmap(base_, map_bytes_);
}

}  // namespace strata
