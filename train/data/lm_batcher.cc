// lm_batcher.cc: random and sequential next-token windows.
#include "train/data/lm_batcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "strata/status.h"

namespace strata::train {
namespace {

// Copies a window of T+1 tokens into T inputs and the T targets after them.
void SplitWindow(const int32_t* window, int64_t seq_len, int32_t* inputs,
                 int32_t* targets) {
  const size_t bytes = static_cast<size_t>(seq_len) * sizeof(int32_t);
  std::memcpy(inputs, window, bytes);
  std::memcpy(targets, window + 1, bytes);
}

}  // namespace

absl::StatusOr<LmBatcher> LmBatcher::Create(const TokenShardReader* reader,
                                            int64_t batch, int64_t seq_len,
                                            uint64_t seed) {
  if (batch < 1 || seq_len < 1 || reader->token_count() < seq_len + 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot draw batches of %d x %d tokens from %s (%d tokens): it needs "
        "batch >= 1 and at least seq_len + 1 tokens; shorten the sequence or "
        "use a larger corpus",
        batch, seq_len, reader->path(), reader->token_count()));
  }
  LmBatcher batcher(reader, batch, seq_len, seed);
  batcher.window_.resize(static_cast<size_t>(seq_len) + 1);
  return batcher;
}

uint64_t LmBatcher::Uniform(uint64_t n) {
  // The largest multiple of n that fits, so every residue is equally likely.
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  for (;;) {
    const uint64_t z = SplitMix64Next(state_);
    if (z < limit) return z % n;
  }
}

absl::Status LmBatcher::Next(int32_t* inputs, int32_t* targets) {
  const uint64_t offsets =
      static_cast<uint64_t>(reader_->token_count() - seq_len_);
  for (int64_t b = 0; b < batch_; ++b) {
    const auto first = static_cast<int64_t>(Uniform(offsets));
    STRATA_RETURN_IF_ERROR(reader_->Read(first, seq_len_ + 1, window_.data()));
    SplitWindow(window_.data(), seq_len_, inputs + b * seq_len_,
                targets + b * seq_len_);
  }
  return absl::OkStatus();
}

absl::StatusOr<ValidationWindows> ValidationWindows::Create(
    const TokenShardReader* reader, int64_t seq_len, int64_t max_tokens) {
  int64_t predicted = reader->token_count() - 1;
  if (max_tokens > 0) predicted = std::min(predicted, max_tokens);
  const int64_t count = seq_len < 1 ? 0 : predicted / seq_len;
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s (%d tokens, at most %d scored) holds no validation window of %d "
        "tokens; shorten the sequence, raise the token limit or use a larger "
        "corpus",
        reader->path(), reader->token_count(), predicted, seq_len));
  }
  return ValidationWindows(reader, seq_len, count);
}

absl::Status ValidationWindows::Get(int64_t i, int32_t* inputs,
                                    int32_t* targets) const {
  if (i < 0 || i >= count_) {
    return absl::OutOfRangeError(
        absl::StrFormat("validation window %d of %s is outside [0, %d)", i,
                        reader_->path(), count_));
  }
  std::vector<int32_t> window(static_cast<size_t>(seq_len_) + 1);
  STRATA_RETURN_IF_ERROR(
      reader_->Read(i * seq_len_, seq_len_ + 1, window.data()));
  SplitWindow(window.data(), seq_len_, inputs, targets);
  return absl::OkStatus();
}

}  // namespace strata::train
