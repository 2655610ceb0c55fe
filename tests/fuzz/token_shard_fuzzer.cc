// token_shard_fuzzer.cc: TokenShardReader, the reader of the token shards a
// corpus is cached as. The vocabulary the caller expects is taken from the
// input's own header, and each input runs twice: as it is and with its
// payload checksum made right, so that a mutation reaches the reads behind
// the checksum. An opened shard reads back ids inside its vocabulary, and
// refuses ranges outside it.
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "train/data/token_shard.h"

namespace strata::fuzz {
namespace {

uint64_t LoadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

void ReadBack(const train::TokenShardReader& shard, uint64_t file_bytes) {
  const int64_t count = shard.token_count();
  STRATA_FUZZ_CHECK(count >= 0 &&
                    static_cast<uint64_t>(count) <= file_bytes / 2);
  std::vector<int32_t> ids(static_cast<size_t>(std::min<int64_t>(count, 4096)));
  for (int64_t first = 0; first < count;
       first += static_cast<int64_t>(ids.size())) {
    const int64_t n = std::min<int64_t>(count - first, ids.size());
    STRATA_FUZZ_CHECK(shard.Read(first, n, ids.data()).ok());
    for (int64_t i = 0; i < n; ++i) {
      STRATA_FUZZ_CHECK(ids[i] >= 0 && ids[i] < shard.vocab_size());
    }
  }
  int32_t one = 0;
  STRATA_FUZZ_CHECK(shard.Read(count, 1, &one).code() ==
                    absl::StatusCode::kOutOfRange);
  STRATA_FUZZ_CHECK(shard.Read(-1, 1, &one).code() ==
                    absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(token_shard) {
  using namespace strata;
  const std::string path = fuzz::FreshScratchDir() + "/train.tok";
  std::string fixed(data);
  int64_t vocab = 256;
  uint64_t vocab_id = 0;
  if (fixed.size() >= train::kTokenShardHeaderBytes) {
    vocab = static_cast<int64_t>(fuzz::LoadLe64(fixed.data() + 24) &
                                 0x7fffffffffffffff);
    vocab_id = fuzz::LoadLe64(fixed.data() + 32);
    const uint64_t sum = XXH3_64bits(fixed.data() + 48, fixed.size() - 48);
    for (int i = 0; i < 8; ++i)
      fixed[40 + i] = static_cast<char>(sum >> (8 * i));
  }
  bool accepted = false;
  for (const std::string& bytes : {std::string(data), fixed}) {
    fuzz::WriteFile(path, bytes);
    auto shard = train::TokenShardReader::Open(path, vocab, vocab_id);
    STRATA_FUZZ_CHECK_REFUSAL(shard.status());
    if (shard.ok()) fuzz::ReadBack(**shard, bytes.size());
    accepted = accepted || shard.ok();
  }
  return accepted;
}
