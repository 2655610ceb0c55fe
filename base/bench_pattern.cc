// bench_pattern.cc: the offset-dependent byte pattern of bench_pattern.h.
#include "base/bench_pattern.h"

#include <cstring>

#include "base/splitmix64.h"

namespace strata {
namespace {

// The pattern's word at word index `i` (SplitMix64).
uint64_t PatternWord(uint64_t seed, uint64_t i) {
  return SplitMix64Mix(seed * 0xD1B54A32D192ED03ull +
                       (i + 1) * kSplitMix64Gamma);
}

}  // namespace

void FillBenchPattern(void* dst, uint64_t bytes, uint64_t seed) {
  auto* out = static_cast<unsigned char*>(dst);
  for (uint64_t at = 0; at < bytes; at += 8) {
    const uint64_t word = PatternWord(seed, at / 8);
    std::memcpy(out + at, &word, bytes - at < 8 ? bytes - at : 8);
  }
}

std::optional<uint64_t> FindPatternMismatch(const void* p, uint64_t bytes,
                                            uint64_t seed) {
  const auto* in = static_cast<const unsigned char*>(p);
  for (uint64_t at = 0; at < bytes; at += 8) {
    const uint64_t word = PatternWord(seed, at / 8);
    const uint64_t n = bytes - at < 8 ? bytes - at : 8;
    if (std::memcmp(in + at, &word, n) == 0) continue;
    for (uint64_t k = 0;; ++k) {  // the differing byte within the word
      if (in[at + k] != reinterpret_cast<const unsigned char*>(&word)[k]) {
        return at + k;
      }
    }
  }
  return std::nullopt;
}

}  // namespace strata
