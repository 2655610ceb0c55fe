#include "tests/util/test_util.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/splitmix64.h"

namespace strata::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/strata-test-XXXXXX";
  char* made = mkdtemp(tmpl.data());
  if (made == nullptr) std::abort();  // the test machine is broken
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void FillPattern(void* dst, uint64_t n, uint64_t seed) {
  FillSplitMix64(dst, n, seed);
}

std::vector<std::byte> Pattern(uint64_t n, uint64_t seed) {
  std::vector<std::byte> v(n);
  FillPattern(v.data(), n, seed);
  return v;
}

StoreOptions SmallStoreOptions(const std::string& nvme_dir,
                               uint64_t device_bytes, uint64_t host_bytes,
                               uint64_t nvme_bytes) {
  StoreOptions o;
  o.device.backend = DeviceBackendKind::kSimulated;
  o.device.budget_bytes = device_bytes;
  o.device.copy_chunk_bytes = 256 * 1024;
  o.host.budget_bytes = host_bytes;
  o.host.lock_memory = false;
  o.nvme.directories = {nvme_dir};
  o.nvme.budget_bytes = nvme_bytes;
  o.nvme.block_size_bytes = 64 * 1024;
  o.nvme.queue_depth = 16;
  return o;
}

bool MatchesPattern(const void* p, uint64_t n, uint64_t seed) {
  std::vector<std::byte> want = Pattern(n, seed);
  return std::memcmp(p, want.data(), n) == 0;
}

std::string SyntheticText(int lines, uint64_t seed) {
  static const char* const kWords[] = {
      "the",    "and",     "of",      "to",   "in",     "that",     "he",
      "shall",  "unto",    "for",     "his",  "they",   "lord",     "with",
      "not",    "them",    "all",     "thou", "which",  "king",     "people",
      "house",  "land",    "came",    "said", "waters", "light",    "earth",
      "heaven", "morning", "evening", "upon", "great",  "children", "city",
      "went",   "before",  "behold",  "name", "day"};
  constexpr uint64_t kCount = sizeof(kWords) / sizeof(kWords[0]);
  uint64_t state = seed;
  std::string text;
  for (int l = 0; l < lines; ++l) {
    const uint64_t words = 4 + SplitMix64Next(state) % 9;
    for (uint64_t w = 0; w < words; ++w) {
      std::string word = kWords[SplitMix64Next(state) % kCount];
      if (w == 0) word[0] = static_cast<char>(word[0] - 'a' + 'A');
      text += (w == 0 ? "" : " ") + word;
    }
    text += ".\n";
  }
  return text;
}

void WriteTestFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  if (!out.flush()) std::abort();  // the test machine is broken
}

}  // namespace strata::testing
