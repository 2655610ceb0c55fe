// checkpoint_manifest_fuzzer.cc: DecodeManifest, the parser of every
// checkpoint's manifest.json. Each input runs twice: as it is (the checksum
// check refuses nearly all mutations) and resealed with its own checksum, so
// that a mutation reaches the parse behind the checksum.
#include <string>

#include "tests/fuzz/fuzz_target.h"
#include "train/io/checkpoint_manifest.h"

namespace strata::fuzz {
namespace {

using train::CheckpointManifest;
using train::CheckpointTensorEntry;

// What an accepted manifest promises its readers.
void CheckAccepted(const CheckpointManifest& m) {
  uint64_t end = 0;
  for (const CheckpointTensorEntry& e : m.tensors) {
    STRATA_FUZZ_CHECK(e.offset == end);
    uint64_t bytes = DTypeSize(e.dtype);
    for (int64_t d : e.shape) {
      STRATA_FUZZ_CHECK(d >= 0);
      STRATA_FUZZ_CHECK(
          !__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes));
    }
    STRATA_FUZZ_CHECK(bytes == e.bytes);
    end += e.bytes;
  }
  STRATA_FUZZ_CHECK(end == m.data_bytes);
  // It writes back to a manifest that decodes to the same text.
  const std::string text = train::EncodeManifest(m);
  auto again = train::DecodeManifest(text, "again.json");
  STRATA_FUZZ_CHECK(again.ok());
  STRATA_FUZZ_CHECK(train::EncodeManifest(*again) == text);
}

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(checkpoint_manifest) {
  const std::string raw(data);
  bool accepted = false;
  for (const std::string& text : {raw, strata::train::ResealManifest(raw)}) {
    auto m = strata::train::DecodeManifest(text, "fuzz/manifest.json");
    STRATA_FUZZ_CHECK_REFUSAL(m.status());
    if (m.ok()) strata::fuzz::CheckAccepted(*m);
    accepted = accepted || m.ok();
  }
  return accepted;
}
