// sentencepiece_bridge.cc: SentencePiece training and encoding. Includes no
// Abseil header (see the .h for why).
#include "train/data/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <fstream>
#include <string>
#include <unordered_map>

namespace strata::train::spm {
namespace {

// Feeds the trainer one line at a time, so the proto records no input path
// (which would make the model bytes depend on where the text lies).
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& path) : in_(path) {
    if (!in_)
      status_ = {sentencepiece::util::StatusCode::kNotFound,
                 "cannot open " + path};
    Next();
  }
  bool done() const override { return done_; }
  void Next() override { done_ = !in_ || !std::getline(in_, line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

std::unordered_map<std::string, std::string> TrainerArgs(int vocab_size) {
  return {{"model_type", "bpe"},
          {"vocab_size", std::to_string(vocab_size)},
          {"byte_fallback", "true"},
          {"character_coverage", "1.0"},
          {"num_threads", "1"},
          {"input_sentence_size", std::to_string(kMaxTrainLines)},
          {"shuffle_input_sentence", "true"},
          {"max_sentence_length", std::to_string(kMaxTrainLineBytes)},
          {"normalization_rule_name", "identity"},
          {"add_dummy_prefix", "false"},
          {"remove_extra_whitespaces", "false"},
          {"bos_id", "-1"},
          {"eos_id", "-1"},
          {"minloglevel", "2"}};  // errors only: no per-merge chatter
}

class SpmModel final : public Model {
 public:
  int piece_size() const override { return sp_.GetPieceSize(); }
  std::string Encode(std::string_view text,
                     std::vector<int32_t>* ids) const override {
    std::vector<int> out;
    try {
      const auto s = sp_.Encode(text, &out);
      if (!s.ok()) return s.ToString();
    } catch (const std::exception& e) {
      return std::string("SentencePiece threw: ") + e.what();
    }
    ids->insert(ids->end(), out.begin(), out.end());
    return "";
  }
  std::string Decode(std::span<const int32_t> ids,
                     std::string* text) const override {
    const std::vector<int> in(ids.begin(), ids.end());
    try {
      const auto s = sp_.Decode(in, text);
      return s.ok() ? "" : s.ToString();
    } catch (const std::exception& e) {
      return std::string("SentencePiece threw: ") + e.what();
    }
  }

  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::string TrainBpe(const std::string& text_path, int vocab_size,
                     uint32_t seed, std::string* model_bytes) {
  // 0.1.97's trainer has no seed field; spm_train's --random_seed calls this.
  // Its all-ones value means "from std::random_device", so it is avoided.
  sentencepiece::SetRandomGeneratorSeed(seed == ~0u ? 0u : seed);
  LineIterator lines(text_path);
  if (!lines.status().ok()) return lines.status().ToString();
  const auto s = sentencepiece::SentencePieceTrainer::Train(
      TrainerArgs(vocab_size), &lines, model_bytes);
  return s.ok() ? "" : s.ToString();
}

std::unique_ptr<Model> Model::Load(std::string_view model_bytes,
                                   std::string* error) {
  auto model = std::make_unique<SpmModel>();
  // SentencePiece throws from inside its loader on some damaged models
  // (darts_clone's "zero-length key" for an empty piece: found by the
  // bpe_model fuzz target, where it terminated strata), beside the status
  // it returns for the rest.
  try {
    const auto s = model->sp_.LoadFromSerializedProto(model_bytes);
    if (!s.ok()) {
      *error = s.ToString();
      return nullptr;
    }
  } catch (const std::exception& e) {
    *error = std::string("SentencePiece threw: ") + e.what();
    return nullptr;
  }
  return model;
}

}  // namespace strata::train::spm
