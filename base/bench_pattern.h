// bench_pattern.h: the byte pattern the benches write and check after timing.
//
// Each 8-byte word depends on the seed and on its offset (SplitMix64 of the
// word index), so a block read back from the wrong address, a stale block or
// a buffer the I/O never filled all fail the check. Cheap enough (about a
// nanosecond per word) to check every byte moved.
#ifndef STRATA_BASE_BENCH_PATTERN_H_
#define STRATA_BASE_BENCH_PATTERN_H_

#include <cstdint>
#include <optional>

namespace strata {

// Fills `bytes` bytes at `dst` with the pattern of `seed`.
void FillBenchPattern(void* dst, uint64_t bytes, uint64_t seed);

// The offset of the first byte at `p` that differs from the pattern of
// `seed`, or nullopt when all `bytes` bytes match.
std::optional<uint64_t> FindPatternMismatch(const void* p, uint64_t bytes,
                                            uint64_t seed);

}  // namespace strata

#endif  // STRATA_BASE_BENCH_PATTERN_H_
