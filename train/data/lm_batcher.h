// lm_batcher.h: minibatches of next-token prediction from a token shard.
// LmBatcher draws B windows of T+1 consecutive tokens at seeded
// pseudo-random offsets (training: every step sees fresh positions, and the
// same seed gives the same batches on every machine); ValidationWindows
// walks the shard in non-overlapping windows (evaluation: every token is
// scored once, in order). In both, targets are the inputs shifted by one:
// targets[b*T + t] = the token after inputs[b*T + t].
#ifndef STRATA_TRAIN_DATA_LM_BATCHER_H_
#define STRATA_TRAIN_DATA_LM_BATCHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/data/token_shard.h"

namespace strata::train {

// Not thread-safe (Next advances the generator); one per training loop.
class LmBatcher {
 public:
  // `reader` must outlive the batcher. InvalidArgument if batch or seq_len
  // is below 1 or the shard has fewer than seq_len + 1 tokens.
  static absl::StatusOr<LmBatcher> Create(const TokenShardReader* reader,
                                          int64_t batch, int64_t seq_len,
                                          uint64_t seed);

  // Fills inputs and targets (batch * seq_len int32s each, row-major,
  // owned by the caller) with the next batch. Window b starts at a uniform
  // offset in [0, tokens - seq_len - 1], drawn from SplitMix64(seed).
  // Errors: the reader's (DataLoss or errno codes).
  absl::Status Next(int32_t* inputs, int32_t* targets);

  int64_t batch() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }
  // The generator's state: where the batch sequence is. A batcher given
  // the state of another with the same shard, shape and seed draws the
  // same batches from there on (checkpoints save it).
  uint64_t rng_state() const { return state_; }
  void set_rng_state(uint64_t state) { state_ = state; }

 private:
  LmBatcher(const TokenShardReader* reader, int64_t batch, int64_t seq_len,
            uint64_t seed)
      : reader_(reader), batch_(batch), seq_len_(seq_len), state_(seed) {}
  // A uniform draw from [0, n), by rejection so no offset is favoured.
  uint64_t Uniform(uint64_t n);

  const TokenShardReader* reader_;
  int64_t batch_, seq_len_;
  uint64_t state_;               // SplitMix64
  std::vector<int32_t> window_;  // seq_len + 1 tokens
};

// Const and thread-safe: windows may be read from many threads at once.
class ValidationWindows {
 public:
  // Windows of seq_len inputs covering the shard's first
  // min(tokens - 1, max_tokens) predicted tokens (max_tokens <= 0: all),
  // rounded down to whole windows. `reader` must outlive it.
  // InvalidArgument if seq_len < 1 or not even one window fits.
  static absl::StatusOr<ValidationWindows> Create(
      const TokenShardReader* reader, int64_t seq_len, int64_t max_tokens);

  int64_t count() const { return count_; }
  int64_t seq_len() const { return seq_len_; }

  // Window `i` in [0, count()): inputs = tokens [i*T, (i+1)*T), targets =
  // tokens [i*T + 1, (i+1)*T + 1), seq_len int32s each (caller-owned).
  // OutOfRange for another i; otherwise the reader's errors.
  absl::Status Get(int64_t i, int32_t* inputs, int32_t* targets) const;

 private:
  ValidationWindows(const TokenShardReader* reader, int64_t seq_len,
                    int64_t count)
      : reader_(reader), seq_len_(seq_len), count_(count) {}

  const TokenShardReader* reader_;
  int64_t seq_len_, count_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_LM_BATCHER_H_
