// bigram.h: the loss a language model must beat to have learned more than
// which token tends to follow which — the validation cross-entropy of an
// add-one-smoothed bigram model counted on the training split.
#ifndef STRATA_TRAIN_DATA_BIGRAM_H_
#define STRATA_TRAIN_DATA_BIGRAM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "train/data/token_shard.h"

namespace strata::train {

// Counts the training pairs (a, b) of adjacent tokens and returns the mean
// over the validation pairs of -ln P(b | a), in nats per token, with
//   P(b | a) = (count(a, b) + 1) / (count(a) + V),
// count(a) the training pairs that start with a (so P(. | a) sums to one) and
// V = vocab_size. Memory grows with the distinct pairs seen, never V^2 (a
// dense 50304^2 table would be 10 GB); both shards are streamed.
// InvalidArgument if vocab_size < 1, the validation shard has fewer than two
// tokens, or a token is outside [0, vocab_size); the readers' errors.
absl::StatusOr<double> BigramBaselineLoss(const TokenShardReader& train,
                                          const TokenShardReader& validation,
                                          int64_t vocab_size);

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_BIGRAM_H_
