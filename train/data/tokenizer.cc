// tokenizer.cc: the byte tokenizer.
#include "train/data/tokenizer.h"

namespace strata::train {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  uint64_t id() const override { return kByteTokenizerId; }
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      ids[i] = static_cast<unsigned char>(text[i]);
    }
    return ids;
  }
  std::string Decode(std::span<const int32_t> ids) const override {
    std::string text;
    text.reserve(ids.size());
    for (int32_t id : ids) {
      if (id >= 0 && id < 256) text.push_back(static_cast<char>(id));
    }
    return text;
  }
};

}  // namespace

std::unique_ptr<Tokenizer> MakeByteTokenizer() {
  return std::make_unique<ByteTokenizer>();
}

}  // namespace strata::train
