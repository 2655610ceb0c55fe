// test_util.h: helpers shared by the tests — a private temporary directory and
// deterministic byte patterns.
#ifndef STRATA_TESTS_UTIL_TEST_UTIL_H_
#define STRATA_TESTS_UTIL_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "strata/options.h"

namespace strata::testing {

// Options for a small store on the simulated device with an NVMe tier in
// `nvme_dir`: budgets in bytes, 64 KiB NVMe blocks, no mlock.
StoreOptions SmallStoreOptions(const std::string& nvme_dir,
                               uint64_t device_bytes, uint64_t host_bytes,
                               uint64_t nvme_bytes);

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Fills `n` bytes at `dst` with a pattern determined by `seed` (SplitMix64).
void FillPattern(void* dst, uint64_t n, uint64_t seed);
// The same pattern as a vector.
std::vector<std::byte> Pattern(uint64_t n, uint64_t seed);
// True if the `n` bytes at `p` equal Pattern(n, seed).
bool MatchesPattern(const void* p, uint64_t n, uint64_t seed);

// `lines` lines of English-like text (sentences of 4-12 words drawn from a
// fixed word list by SplitMix64(seed)), each ending in '\n': a small corpus
// a BPE vocabulary trains on in a fraction of a second.
std::string SyntheticText(int lines, uint64_t seed);

// Writes `bytes` to `path` (replacing it); aborts if it cannot.
void WriteTestFile(const std::string& path, const std::string& bytes);

}  // namespace strata::testing

#endif  // STRATA_TESTS_UTIL_TEST_UTIL_H_
