// bpe_model_fuzzer.cc: the BPE tokenizer's cache, as LoadOrTrainBpe finds it
// (a serialized SentencePiece model under its cache name), and
// LoadBpeModel on the same bytes. A model that loads encodes text to ids
// inside its vocabulary and decodes them without a crash.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "train/data/bpe_tokenizer.h"
#include "train/data/tokenizer.h"

namespace strata::fuzz {
namespace {

// The vocabulary and seed of the checked-in seeds' models (make_seeds.cc).
constexpr int kVocab = 300;
constexpr uint64_t kSeed = 0;

void Use(const train::Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.Encode(text);
  for (int32_t id : ids) {
    STRATA_FUZZ_CHECK(id >= 0 && id < tokenizer.vocab_size());
  }
  (void)tokenizer.Decode(ids);
}

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(bpe_model) {
  using namespace strata;
  const std::string dir = fuzz::FreshScratchDir();
  fuzz::WriteFile(
      dir + "/" + train::BpeModelFileName(fuzz::kVocab, fuzz::kSeed), data);
  auto cached = train::LoadOrTrainBpe("", dir, fuzz::kVocab, fuzz::kSeed);
  STRATA_FUZZ_CHECK_REFUSAL(cached.status());
  if (cached.ok()) {
    STRATA_FUZZ_CHECK((*cached)->vocab_size() == fuzz::kVocab);
    fuzz::Use(**cached, "In the beginning God created the heaven");
  }
  auto loaded = train::LoadBpeModel(std::string(data), "fuzz.model");
  STRATA_FUZZ_CHECK_REFUSAL(loaded.status());
  if (loaded.ok()) fuzz::Use(**loaded, data.substr(0, 256));
  return cached.ok() && loaded.ok();
}
