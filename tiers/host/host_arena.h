// host_arena.h: HostArena, the pinned host tier's one reservation.
//
// Policy: the whole budget is reserved at open with one anonymous mmap
// (2 MiB-aligned so transparent huge pages can back it), locked with mlock
// (best effort: a failure is reported, not fatal) and, when a GPU is in use,
// registered with cudaHostRegister in chunks of at most 1 GiB so H2D/D2H copies
// run at full DMA speed. Page-aligned, so any 4 KiB-aligned extent of it can
// feed O_DIRECT. Nothing is allocated on the transfer path.
//
// Thread safety: immutable after Create.
#ifndef STRATA_TIERS_HOST_HOST_ARENA_H_
#define STRATA_TIERS_HOST_HOST_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "tiers/device/device_backend.h"

namespace strata {

class HostArena {
 public:
  // Maps `bytes` (> 0, rounded up to 4 KiB). `device` may be null (no
  // registration); it must outlive the arena. ResourceExhausted when `bytes`
  // exceeds physical memory or the mmap fails.
  static absl::StatusOr<std::unique_ptr<HostArena>> Create(
      uint64_t bytes, bool lock_memory, DeviceBackend* device);
  // Unified-memory mode: the host tier is `bytes` of managed memory from
  // DeviceBackend::ReserveManaged (4 KiB-aligned, a multiple of 4 KiB), which
  // the backend owns and frees. Neither locked nor registered: the driver
  // migrates its pages, and NVMe I/O reaches it through pinned bounce chunks.
  static std::unique_ptr<HostArena> Managed(std::byte* base, uint64_t bytes);
  ~HostArena();  // unregisters, unlocks and unmaps (not managed memory)
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  std::byte* base() const { return base_; }
  uint64_t size_bytes() const { return size_; }
  bool locked() const { return locked_; }          // mlock succeeded
  bool registered() const { return registered_; }  // cudaHostRegister'd
  bool managed() const { return managed_; }        // from ReserveManaged

 private:
  HostArena() = default;
  std::byte* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t map_bytes_ = 0;
  bool locked_ = false;
  bool registered_ = false;
  bool managed_ = false;
  DeviceBackend* device_ = nullptr;
};

}  // namespace strata

#endif  // STRATA_TIERS_HOST_HOST_ARENA_H_
