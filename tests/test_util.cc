#include "tests/test_util.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>

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
  auto* out = static_cast<unsigned char*>(dst);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; i += 8) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const uint64_t len = n - i < 8 ? n - i : 8;
    std::memcpy(out + i, &z, len);
  }
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

}  // namespace strata::testing
