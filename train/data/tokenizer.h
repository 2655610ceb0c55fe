// tokenizer.h: the text <-> token-id mapping a language model is trained
// with. Two kinds: the byte tokenizer (256 ids, the raw bytes; nothing to
// train) and SentencePiece BPE (train/data/bpe_tokenizer.h). A shard of token
// ids records the tokenizer's id() so a model never reads ids from another
// vocabulary (train/data/token_shard.h).
//
// Tokenizers are immutable after construction; every method is const and
// safe to call from many threads at once.
#ifndef STRATA_TRAIN_DATA_TOKENIZER_H_
#define STRATA_TRAIN_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::train {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // What it is, for logs and cache names: "byte", "bpe:4096".
  virtual std::string name() const = 0;
  // Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // Identifies the vocabulary: two tokenizers with the same id map text to
  // the same ids. A constant for the byte tokenizer; the XXH3-64 of the
  // model bytes for BPE.
  virtual uint64_t id() const = 0;
  // The ids of `text`; every string is encodable (BPE falls back to byte
  // pieces). Decode(Encode(s)) == s for every s for the byte tokenizer; for
  // BPE for every valid UTF-8 s without U+2581 (SentencePiece's space
  // marker, which comes back as ' '): SentencePiece replaces each byte of
  // invalid UTF-8 with U+FFFD.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // The text of `ids`; ids outside [0, vocab_size()) are skipped.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
};

// The byte tokenizer's id().
inline constexpr uint64_t kByteTokenizerId = 0x5354524142595445ull;  // STRABYTE

// The byte tokenizer: id i is the byte i, vocab_size() 256, name() "byte".
std::unique_ptr<Tokenizer> MakeByteTokenizer();

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_TOKENIZER_H_
