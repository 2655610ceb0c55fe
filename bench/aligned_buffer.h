// aligned_buffer.h: store_roundtrip_bench's host buffers, mapped like the
// store's host arena so the baselines and the store move bytes between the
// same kind of memory, and the pattern check every case runs after timing.
#ifndef STRATA_BENCH_ALIGNED_BUFFER_H_
#define STRATA_BENCH_ALIGNED_BUFFER_H_

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/splitmix64.h"
#include "strata/options.h"

namespace strata {

inline constexpr uint64_t kHugePageBytes = 2 * kMiB;

inline uint64_t RoundUp(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

// A pre-faulted host buffer mapped like the store's host arena: anonymous
// mmap at a 2 MiB-aligned address (so 4 KiB-aligned too) with
// MADV_HUGEPAGE. Without huge pages a 1 MiB O_DIRECT request spans 256 pages,
// more segments than a virtio disk takes in one request, and the baseline
// would be slower than the store for that reason alone. Aborts if the mapping
// fails: a benchmark without its buffers has nothing to measure.
struct AlignedBuffer {
  explicit AlignedBuffer(uint64_t bytes)
      : size(bytes),
        mapped(RoundUp(std::max<uint64_t>(bytes, 1), kHugePageBytes)) {
    void* raw = mmap(nullptr, mapped + kHugePageBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      std::perror("mmap");
      std::abort();
    }
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = RoundUp(start, kHugePageBytes);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = start + mapped + kHugePageBytes - (aligned + mapped);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + mapped), tail);
    data = reinterpret_cast<unsigned char*>(aligned);
    madvise(data, mapped, MADV_HUGEPAGE);  // best effort
    std::memset(data, 0, mapped);
  }
  ~AlignedBuffer() { munmap(data, mapped); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint64_t size;
  uint64_t mapped;
  unsigned char* data;
};

// Whether the `n` bytes at `p` are FillSplitMix64's pattern for `seed`.
inline bool MatchesPattern(const void* p, uint64_t n, uint64_t seed) {
  AlignedBuffer want(n);
  FillSplitMix64(want.data, n, seed);
  return std::memcmp(p, want.data, n) == 0;
}

}  // namespace strata

#endif  // STRATA_BENCH_ALIGNED_BUFFER_H_
