// splitmix64.h: SplitMix64 (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014), the one seeded generator
// strata uses where results must be the same on every platform and compiler:
// model initialisation, fault draws, test and benchmark byte patterns.
// (std::mt19937_64 is fixed by the standard too, but the distributions over
// it are not, and it is far larger than a 64-bit state.)
#ifndef STRATA_BASE_SPLITMIX64_H_
#define STRATA_BASE_SPLITMIX64_H_

#include <cstdint>
#include <cstring>

namespace strata {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The finaliser: a bijection on 64 bits that spreads every input bit over the
// output (also useful alone to derive one seed from another).
constexpr uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Advances `state` and returns the next output.
constexpr uint64_t SplitMix64Next(uint64_t& state) {
  state += kSplitMix64Gamma;
  return SplitMix64Mix(state);
}

// Fills `n` bytes at `dst` with the SplitMix64 stream of `seed` (8 bytes per
// output, little-endian on the machines strata runs on; a last partial word is
// cut). Distinct seeds give distinct patterns, for tests and benchmarks that
// verify the bytes they moved.
inline void FillSplitMix64(void* dst, uint64_t n, uint64_t seed) {
  auto* out = static_cast<unsigned char*>(dst);
  uint64_t state = seed * kSplitMix64Gamma + 1;
  for (uint64_t i = 0; i < n; i += 8) {
    const uint64_t z = SplitMix64Next(state);
    std::memcpy(out + i, &z, n - i < 8 ? n - i : 8);
  }
}

}  // namespace strata

#endif  // STRATA_BASE_SPLITMIX64_H_
