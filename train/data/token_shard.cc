// token_shard.cc: the shard header's byte layout (see token_shard.h).
#include "train/data/token_shard.h"

#include <algorithm>
#include <bit>

namespace strata::train {
namespace {

// The payload is written in the host's order; the format says little-endian.
static_assert(std::endian::native == std::endian::little,
              "token shards assume a little-endian host");

template <typename T>
void Put(unsigned char* at, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) at[i] = (value >> (8 * i)) & 0xff;
}

template <typename T>
T Get(const unsigned char* at) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= T{at[i]} << (8 * i);
  return value;
}

}  // namespace

std::array<unsigned char, kTokenShardHeaderBytes> EncodeTokenShardHeader(
    const TokenShardHeader& header) {
  std::array<unsigned char, kTokenShardHeaderBytes> bytes{};
  std::copy(std::begin(kTokenShardMagic), std::end(kTokenShardMagic),
            bytes.begin());
  Put(&bytes[8], header.version);
  Put(&bytes[12], header.token_bytes);
  Put(&bytes[16], header.token_count);
  Put(&bytes[24], header.vocab_size);
  Put(&bytes[32], header.vocab_id);
  Put(&bytes[40], header.checksum);
  return bytes;
}

bool DecodeTokenShardHeader(
    std::span<const unsigned char, kTokenShardHeaderBytes> bytes,
    TokenShardHeader* header) {
  if (!std::equal(std::begin(kTokenShardMagic), std::end(kTokenShardMagic),
                  bytes.begin())) {
    return false;
  }
  header->version = Get<uint32_t>(&bytes[8]);
  header->token_bytes = Get<uint32_t>(&bytes[12]);
  header->token_count = Get<uint64_t>(&bytes[16]);
  header->vocab_size = Get<uint64_t>(&bytes[24]);
  header->vocab_id = Get<uint64_t>(&bytes[32]);
  header->checksum = Get<uint64_t>(&bytes[40]);
  return true;
}

}  // namespace strata::train
