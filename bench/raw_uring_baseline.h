// raw_uring_baseline.h: store_roundtrip_bench's io_uring baselines
// (uring_write/N, uring_read/N, uring_write_read/N, and the diagnostic
// uring_read_touch/N and uring_read_xxh3/N): liburing used directly,
// not the store's engine, on a private O_DIRECT file, so the store's NVMe
// cases have a ratio to the raw device path on the same sizes.
//
// The file is fallocate'd in the given directory; it and the buffer are
// registered with a depth-32 ring as the store's engine registers its own
// (plain ops if registration is refused; the label says which). Requests are
// 1 MiB (or the whole size if smaller), a ring's worth submitted at once and
// all reaped; a short or failed request fails the case.
#ifndef STRATA_BENCH_RAW_URING_BASELINE_H_
#define STRATA_BENCH_RAW_URING_BASELINE_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "strata/options.h"

namespace strata {

inline constexpr uint64_t kUringRequestBytes = 1 * kMiB;
inline constexpr unsigned kUringQueueDepth = 32;
inline constexpr uint64_t kDirectIoBytes = 4096;  // O_DIRECT's size granule

// What one iteration does: write the buffer, read it back, or both. The
// diagnostic reads then look at what they read: kReadTouch loads one word
// per 64-byte cache line (the least a consumer of the bytes can do),
// kReadXxh3 hashes them with XXH3-64 as the store's verification does. The
// ratio table divides by uring_read, which never looks at its buffer; these
// say how much of a store read's gap any reader of the data pays here.
enum class RawOp { kWrite, kRead, kWriteRead, kReadTouch, kReadXxh3 };

// The size the baseline runs at for `bytes`: rounded up to kDirectIoBytes.
inline uint64_t UringBaselineSize(uint64_t bytes) {
  return (bytes + kDirectIoBytes - 1) / kDirectIoBytes * kDirectIoBytes;
}

// The benchmark body: opens the file in `dir` (removed when it returns),
// writes the pattern once and reads it back (warm-up), times `op` on `size`
// bytes per iteration, then reads the file back and checks the pattern. Fails
// the case (SkipWithError) when `size` is not a multiple of kDirectIoBytes,
// on any io_uring error or short request, or when the bytes differ.
void BM_Uring(benchmark::State& state, const std::string& dir, uint64_t size,
              RawOp op);

}  // namespace strata

#endif  // STRATA_BENCH_RAW_URING_BASELINE_H_
