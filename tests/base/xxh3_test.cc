// base/xxh3.h's dispatched XXH3 (AVX2 / AVX-512 at run time) gives the
// library's baseline hashes, whole and streamed in pieces: checksums written
// by one path verify on the other (an NVMe copy, a checkpoint's manifest).
#define XXH_DISPATCH_DISABLE_REPLACE  // both paths callable by name here
#include "base/xxh3.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace strata {
namespace {

#if defined(__x86_64__)
TEST(Xxh3Test, DispatchedHashesEqualTheBaselineOnes) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    // Empty, short (the short-input paths), and past the 1 KiB block.
    const size_t n = round < 40 ? round : rng() % (3 << 16);
    std::vector<unsigned char> bytes(n);
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
    const XXH64_hash_t baseline = XXH3_64bits(bytes.data(), n);
    EXPECT_EQ(XXH3_64bits_dispatch(bytes.data(), n), baseline) << n;
    XXH3_state_t* state = XXH3_createState();
    ASSERT_NE(state, nullptr);
    XXH3_64bits_reset(state);
    for (size_t at = 0; at < n;) {
      const size_t piece = std::min<size_t>(n - at, 1 + rng() % 70000);
      XXH3_64bits_update_dispatch(state, bytes.data() + at, piece);
      at += piece;
    }
    EXPECT_EQ(XXH3_64bits_digest(state), baseline) << n;
    XXH3_freeState(state);
  }
}
#endif

// A published XXH3-64 value (xxHash's test vectors: the empty input), so a
// library that hashed differently everywhere would not pass either.
TEST(Xxh3Test, EmptyInputHashesToTheSpecsValue) {
  EXPECT_EQ(XXH3_64bits(nullptr, 0), 0x2D06800538D394C2ULL);
}

}  // namespace
}  // namespace strata
