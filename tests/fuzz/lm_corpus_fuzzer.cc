// lm_corpus_fuzzer.cc: a user's `--corpus=FILE` as PrepareLmCorpus takes it:
// scanned, split, tokenized (byte tokens) and cached as token shards, then
// prepared again from the cache. A corpus that prepares holds one token per
// byte of its lines, each line with its '\n', the same both times.
#include <string>

#include "tests/fuzz/fuzz_target.h"
#include "train/data/lm_corpus.h"

STRATA_FUZZ_TARGET(lm_corpus) {
  using namespace strata;
  const std::string dir = fuzz::FreshScratchDir();
  const train::LmCorpusOptions options{.corpus_path = dir + "/corpus.txt",
                                       .tokenizer = "byte",
                                       .cache_dir = dir + "/cache"};
  fuzz::WriteFile(options.corpus_path, data);
  const int64_t tokens = static_cast<int64_t>(data.size()) +
                         (!data.empty() && data.back() != '\n' ? 1 : 0);
  for (int pass = 0; pass < 2; ++pass) {  // made, then from the cache
    auto corpus = train::PrepareLmCorpus(options);
    STRATA_FUZZ_CHECK_REFUSAL(corpus.status());
    if (!corpus.ok()) return false;
    STRATA_FUZZ_CHECK(corpus->train_tokens() > 0 &&
                      corpus->validation_tokens() > 0);
    STRATA_FUZZ_CHECK(corpus->train_tokens() + corpus->validation_tokens() ==
                      tokens);
  }
  return true;
}
