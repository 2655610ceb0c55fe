// sentencepiece_bridge.h: the only door to SentencePiece (libsentencepiece
// 0.1.97, Debian's libsentencepiece-dev) — BPE training and a loaded model's
// Encode/Decode, behind plain standard-library types.
//
// Why a bridge: sentencepiece_processor.h declares `absl::string_view` as an
// alias of std::string_view, while Debian's Abseil defines its own class of
// that name, so no translation unit can include both. This header and its .cc
// include no Abseil; everything else in strata::train talks to SentencePiece
// through it and turns its error strings into absl::Status.
#ifndef STRATA_TRAIN_DATA_SENTENCEPIECE_BRIDGE_H_
#define STRATA_TRAIN_DATA_SENTENCEPIECE_BRIDGE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::train::spm {

// Trains a byte-fallback BPE model of `vocab_size` pieces on the lines of the
// text file `text_path` (one training sentence per line, '\n' excluded) and
// stores its serialized ModelProto in `*model_bytes`. The settings make the
// model a pure function of (text, vocab_size, seed): one thread,
// SentencePiece's global generator seeded with `seed` (it picks the line sample
// when a corpus has more than kMaxTrainLines lines), and no file path or output
// prefix in the proto. Identity normalisation, no dummy prefix and whitespace
// kept as is let valid UTF-8 round-trip unless it holds U+2581 (SentencePiece's
// space marker, which decodes to ' '); invalid UTF-8 bytes become U+FFFD. Ids:
// 0 is <unk>, then the 256 byte pieces; no <s> or </s>. Returns "" on success,
// else SentencePiece's error message. Not thread-safe: it sets SentencePiece's
// process-wide seed.
std::string TrainBpe(const std::string& text_path, int vocab_size,
                     uint32_t seed, std::string* model_bytes);

// Lines sampled (reservoir, seeded) when the training text has more.
inline constexpr int64_t kMaxTrainLines = 2'000'000;
// Longer training lines are skipped by the trainer (not by encoding).
inline constexpr int kMaxTrainLineBytes = 1 << 16;

// A loaded model. Encode and Decode are const and thread-safe.
class Model {
 public:
  virtual ~Model() = default;
  // Loads a serialized ModelProto; on failure returns null and sets *error.
  static std::unique_ptr<Model> Load(std::string_view model_bytes,
                                     std::string* error);
  virtual int piece_size() const = 0;
  // Appends the ids of `text` to `*ids`; "" on success, else the error.
  virtual std::string Encode(std::string_view text,
                             std::vector<int32_t>* ids) const = 0;
  // The text of `ids`, each in [0, piece_size()); "" on success.
  virtual std::string Decode(std::span<const int32_t> ids,
                             std::string* text) const = 0;
};

}  // namespace strata::train::spm

#endif  // STRATA_TRAIN_DATA_SENTENCEPIECE_BRIDGE_H_
