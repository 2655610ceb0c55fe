// bpe_tokenizer.h: a SentencePiece byte-fallback BPE vocabulary, trained
// once on a corpus's training split and cached as a model file, so every run
// after the first loads the same vocabulary instead of training again.
//
// Cache: `<cache_dir>/bpe-v<vocab_size>-seed<seed>.model`, the serialized
// SentencePiece ModelProto. Training is deterministic (one thread, fixed
// seed, no paths in the proto): the same text, size and seed give the same
// bytes, hence the same Tokenizer::id(), wherever and whenever it runs.
#ifndef STRATA_TRAIN_DATA_BPE_TOKENIZER_H_
#define STRATA_TRAIN_DATA_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "train/data/tokenizer.h"

namespace strata::train {

// 256 byte pieces and <unk> come first; a vocabulary needs more than that.
inline constexpr int kMinBpeVocab = 257;
inline constexpr int kMaxBpeVocab = 1 << 20;

// "bpe-v<vocab_size>-seed<seed>.model".
std::string BpeModelFileName(int vocab_size, uint64_t seed);

// Returns the BPE tokenizer cached in `cache_dir` for (vocab_size, seed),
// training it on the lines of `train_text_path` first if the cache has none
// (a few seconds for 4096 pieces on the KJV; `cache_dir` is created).
// The caller keys `cache_dir` by corpus: the file name does not.
// Errors:
//   InvalidArgument  vocab_size outside [kMinBpeVocab, kMaxBpeVocab], or
//                    SentencePiece refused to train (too large a vocabulary
//                    for the text, say); the message says which.
//   NotFound         no cached model and no `train_text_path`.
//   DataLoss         the cached model does not load or has another size;
//                    the message names it and says to delete it.
//   errno codes      the cache cannot be read or written.
// Not thread-safe while it trains (SentencePiece's seed is process-wide).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadOrTrainBpe(
    const std::string& train_text_path, const std::string& cache_dir,
    int vocab_size, uint64_t seed);

// The BPE tokenizer of a serialized SentencePiece model read from `path`
// (which only names it in errors). DataLoss if the bytes do not load.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBpeModel(
    const std::string& model_bytes, const std::string& path);

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_BPE_TOKENIZER_H_
