// bpe_tokenizer.cc: the cached SentencePiece BPE tokenizer.
#include "train/data/bpe_tokenizer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/data/sentencepiece_bridge.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(std::unique_ptr<spm::Model> model, uint64_t id)
      : model_(std::move(model)), id_(id) {}

  std::string name() const override {
    return absl::StrFormat("bpe:%d", model_->piece_size());
  }
  int64_t vocab_size() const override { return model_->piece_size(); }
  uint64_t id() const override { return id_; }

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    const std::string error = model_->Encode(text, &ids);
    // A loaded model with byte fallback encodes every string; an error here
    // is a SentencePiece bug, and silently dropping text would be worse.
    if (!error.empty()) {
      std::fprintf(stderr, "strata: SentencePiece Encode failed: %s\n",
                   error.c_str());
      std::abort();
    }
    return ids;
  }

  std::string Decode(std::span<const int32_t> ids) const override {
    std::vector<int32_t> valid;
    valid.reserve(ids.size());
    for (int32_t id : ids) {
      if (id >= 0 && id < vocab_size()) valid.push_back(id);
    }
    std::string text;
    model_->Decode(valid, &text);  // cannot fail for in-range ids
    return text;
  }

 private:
  const std::unique_ptr<spm::Model> model_;
  const uint64_t id_;
};

// SentencePiece takes a 32-bit seed and reserves all ones; a mix of the 64
// bits keeps distinct seeds distinct in practice and avoids that value.
uint32_t SpmSeed(uint64_t seed) {
  return static_cast<uint32_t>(SplitMix64Mix(seed) % 0xFFFFFFFFull);
}

absl::StatusOr<std::string> TrainModel(const std::string& text_path,
                                       int vocab_size, uint64_t seed) {
  if (!std::filesystem::exists(text_path)) {
    return absl::NotFoundError(absl::StrFormat(
        "BPE training text %s does not exist (PrepareLmCorpus writes it)",
        text_path));
  }
  std::string model_bytes;
  const std::string error =
      spm::TrainBpe(text_path, vocab_size, SpmSeed(seed), &model_bytes);
  if (!error.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "training a %d-piece BPE vocabulary on %s failed: %s; choose another "
        "vocabulary size (bpe:N) or a larger corpus",
        vocab_size, text_path, error));
  }
  return model_bytes;
}

}  // namespace

std::string BpeModelFileName(int vocab_size, uint64_t seed) {
  return absl::StrFormat("bpe-v%d-seed%d.model", vocab_size, seed);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBpeModel(
    const std::string& model_bytes, const std::string& path) {
  std::string error;
  std::unique_ptr<spm::Model> model = spm::Model::Load(model_bytes, &error);
  if (model == nullptr) {
    return absl::DataLossError(absl::StrFormat(
        "corrupt tokenizer model %s (%s); delete it to retrain", path, error));
  }
  const uint64_t id = XXH3_64bits(model_bytes.data(), model_bytes.size());
  return std::make_unique<BpeTokenizer>(std::move(model), id);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadOrTrainBpe(
    const std::string& train_text_path, const std::string& cache_dir,
    int vocab_size, uint64_t seed) {
  if (vocab_size < kMinBpeVocab || vocab_size > kMaxBpeVocab) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "BPE vocabulary size %d is outside [%d, %d]; choose bpe:N within it",
        vocab_size, kMinBpeVocab, kMaxBpeVocab));
  }
  const std::string path =
      (std::filesystem::path(cache_dir) / BpeModelFileName(vocab_size, seed))
          .string();
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (absl::IsNotFound(bytes.status())) {
    STRATA_RETURN_IF_ERROR(MakeDirectories(cache_dir));
    bytes = TrainModel(train_text_path, vocab_size, seed);
    if (bytes.ok()) STRATA_RETURN_IF_ERROR(WriteFileAtomically(path, *bytes));
  }
  if (!bytes.ok()) return bytes.status();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                          LoadBpeModel(*bytes, path));
  if (tokenizer->vocab_size() != vocab_size) {
    return absl::DataLossError(absl::StrFormat(
        "tokenizer model %s has %d pieces, its name says %d; delete it to "
        "retrain",
        path, tokenizer->vocab_size(), vocab_size));
  }
  return tokenizer;
}

}  // namespace strata::train
