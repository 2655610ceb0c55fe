// safetensors_fuzzer.cc: ReadSafetensorsHeader, the reader `strata export`
// checks its output with. An accepted header's tensors tile the data and
// each holds its shape's bytes.
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_target.h"
#include "train/io/safetensors_header.h"

STRATA_FUZZ_TARGET(safetensors) {
  using namespace strata;
  const std::string path = fuzz::FreshScratchDir() + "/model.safetensors";
  fuzz::WriteFile(path, data);
  auto h = train::ReadSafetensorsHeader(path);
  STRATA_FUZZ_CHECK_REFUSAL(h.status());
  if (!h.ok()) return false;
  STRATA_FUZZ_CHECK(8 + h->header_bytes + h->data_bytes == data.size());
  uint64_t at = 0;
  for (const train::SafetensorsTensor& t : h->tensors) {
    STRATA_FUZZ_CHECK(t.begin == at);
    uint64_t bytes = train::SafetensorsDTypeSize(t.dtype);
    STRATA_FUZZ_CHECK(bytes > 0);
    for (int64_t d : t.shape) {
      STRATA_FUZZ_CHECK(
          !__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes));
    }
    STRATA_FUZZ_CHECK(bytes == t.end - t.begin);
    at = t.end;
  }
  STRATA_FUZZ_CHECK(at == h->data_bytes);
  return true;
}
