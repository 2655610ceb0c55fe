// bigram.cc: sparse bigram counts (a hash map keyed by a*V + b) and the
// smoothed validation loss, both over shards read in bounded chunks.
#include "train/data/bigram.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "strata/status.h"

namespace strata::train {
namespace {

constexpr int64_t kChunkTokens = int64_t{1} << 20;

// Calls pair(a, b) for every adjacent pair of `shard`, reading one chunk at
// a time. InvalidArgument if a token is outside [0, vocab_size).
absl::Status ForEachPair(const TokenShardReader& shard, int64_t vocab_size,
                         absl::FunctionRef<void(int32_t, int32_t)> pair) {
  std::vector<int32_t> chunk;
  int32_t previous = -1;
  for (int64_t first = 0; first < shard.token_count(); first += kChunkTokens) {
    chunk.resize(std::min(kChunkTokens, shard.token_count() - first));
    STRATA_RETURN_IF_ERROR(shard.Read(first, chunk.size(), chunk.data()));
    for (int32_t token : chunk) {
      if (token < 0 || token >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s holds token %d, outside the vocabulary [0, %d); rebuild it "
            "with the model's tokenizer",
            shard.path(), token, vocab_size));
      }
      if (previous >= 0) pair(previous, token);
      previous = token;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> BigramBaselineLoss(const TokenShardReader& train,
                                          const TokenShardReader& validation,
                                          int64_t vocab_size) {
  if (vocab_size < 1 || validation.token_count() < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a bigram baseline needs a vocabulary (got %d ids) and at least two "
        "validation tokens (%s has %d); use a larger corpus",
        vocab_size, validation.path(), validation.token_count()));
  }
  const auto v = static_cast<uint64_t>(vocab_size);
  absl::flat_hash_map<uint64_t, int64_t> pairs;
  std::vector<int64_t> starts(v, 0);  // count(a)
  STRATA_RETURN_IF_ERROR(
      ForEachPair(train, vocab_size, [&](int32_t a, int32_t b) {
        ++pairs[static_cast<uint64_t>(a) * v + static_cast<uint64_t>(b)];
        ++starts[static_cast<size_t>(a)];
      }));
  double nats = 0;
  int64_t scored = 0;
  STRATA_RETURN_IF_ERROR(
      ForEachPair(validation, vocab_size, [&](int32_t a, int32_t b) {
        const auto it =
            pairs.find(static_cast<uint64_t>(a) * v + static_cast<uint64_t>(b));
        const double count = it == pairs.end() ? 0.0 : double(it->second);
        nats -= std::log((count + 1.0) /
                         (double(starts[static_cast<size_t>(a)]) + double(v)));
        ++scored;
      }));
  return nats / double(scored);
}

}  // namespace strata::train
