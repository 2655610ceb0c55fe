// token_shard.h: a file of token ids — one split of a tokenized corpus — with
// a header that says which vocabulary produced it and a checksum of the ids.
//
// Format (version 1), all integers little-endian:
//   offset  0  magic "STRATOK\0"       8 bytes
//           8  version                 u32 (kTokenShardVersion)
//          12  token width in bytes    u32: 2 when vocab_size <= 65536, else 4
//          16  token count             u64
//          24  vocab size              u64
//          32  vocabulary id           u64 (Tokenizer::id())
//          40  XXH3-64 of the payload  u64
//          48  payload: count tokens of `width` bytes each, unsigned
// The file is exactly 48 + count * width bytes.
//
// The writer streams (memory stays at one buffer) and publishes the shard by
// renaming a finished temporary, so a crash never leaves a partial shard
// under the final name. The reader checks the header and checksum once at
// Open and then reads ranges with pread: a shard larger than RAM works.
#ifndef STRATA_TRAIN_DATA_TOKEN_SHARD_H_
#define STRATA_TRAIN_DATA_TOKEN_SHARD_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct XXH3_state_s;  // xxhash.h's streaming state, kept out of this header

namespace strata::train {

inline constexpr char kTokenShardMagic[8] = {'S', 'T', 'R', 'A',
                                             'T', 'O', 'K', '\0'};
inline constexpr uint32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderBytes = 48;
// The largest vocabulary a shard holds: every id fits an int32.
inline constexpr int64_t kMaxTokenShardVocab = int64_t{1} << 31;

// 2 when every id of a `vocab_size` vocabulary fits 16 bits, else 4.
constexpr uint32_t TokenWidthFor(int64_t vocab_size) {
  return vocab_size <= 65536 ? 2 : 4;
}

struct TokenShardHeader {
  uint32_t version = kTokenShardVersion;
  uint32_t token_bytes = 2;
  uint64_t token_count = 0;
  uint64_t vocab_size = 0;
  uint64_t vocab_id = 0;
  uint64_t checksum = 0;  // XXH3-64 of the payload bytes
};

// The kTokenShardHeaderBytes bytes of `header`, magic first.
std::array<unsigned char, kTokenShardHeaderBytes> EncodeTokenShardHeader(
    const TokenShardHeader& header);
// Parses header bytes; false (and *header untouched) if the magic differs.
bool DecodeTokenShardHeader(
    std::span<const unsigned char, kTokenShardHeaderBytes> bytes,
    TokenShardHeader* header);

// Writes one shard. Not thread-safe; one writer per shard.
class TokenShardWriter {
 public:
  // Starts `path` (written as a temporary beside it until Finish).
  // InvalidArgument if vocab_size is outside [1, 2^31]; errno codes naming
  // the temporary if it cannot be created.
  static absl::StatusOr<std::unique_ptr<TokenShardWriter>> Create(
      const std::string& path, int64_t vocab_size, uint64_t vocab_id);
  // Removes the temporary if Finish did not succeed.
  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  // Appends `tokens`. InvalidArgument (and nothing appended) if one is
  // outside [0, vocab_size); errno codes if the disk refuses the bytes.
  absl::Status Append(std::span<const int32_t> tokens);
  // Writes the header, syncs and renames the temporary to the final path.
  // After it (successful or not) the writer accepts nothing more.
  absl::Status Finish();
  int64_t token_count() const { return static_cast<int64_t>(count_); }

 private:
  TokenShardWriter(std::string path, std::string temp_path, int fd,
                   int64_t vocab_size, uint64_t vocab_id);
  // Writes and checksums the buffered payload; on failure abandons.
  absl::Status Flush();
  // Closes and removes the temporary; the writer accepts nothing more.
  void Abandon();

  const std::string path_, temp_path_;
  const int64_t vocab_size_;
  const uint64_t vocab_id_;
  const uint32_t width_;
  int fd_;  // -1 once finished or failed
  uint64_t count_ = 0;
  uint64_t written_ = kTokenShardHeaderBytes;  // file offset of buffer_
  std::vector<unsigned char> buffer_;
  ::XXH3_state_s* checksum_;
};

// Reads one shard. Read is const and safe from many threads at once.
class TokenShardReader {
 public:
  // Opens `path`, checks its header against the vocabulary the caller will
  // use and verifies the checksum (streaming the payload once). Errors, each
  // naming the file and the fix:
  //   NotFound            the file does not exist.
  //   DataLoss            bad magic, a vocabulary outside [1, 2^31], a width
  //                       that is neither 2 nor 4 or too narrow for it, a size
  //                       other than the header promises (truncated or trailing
  //                       bytes), a checksum mismatch, or an id outside the
  //                       vocabulary: "delete it to rebuild".
  //   FailedPrecondition  another format version, or a vocabulary other than
  //                       (expected_vocab_size, expected_vocab_id).
  //   errno codes         it cannot be opened or read.
  static absl::StatusOr<std::unique_ptr<TokenShardReader>> Open(
      const std::string& path, int64_t expected_vocab_size,
      uint64_t expected_vocab_id);
  ~TokenShardReader();
  TokenShardReader(const TokenShardReader&) = delete;
  TokenShardReader& operator=(const TokenShardReader&) = delete;

  // Copies tokens [first, first+count) into out[0, count) (the caller owns
  // `out`). OutOfRange if the range is not inside the shard; DataLoss (an
  // id outside the vocabulary) or errno codes if the file changed or cannot
  // be read since Open.
  absl::Status Read(int64_t first, int64_t count, int32_t* out) const;

  int64_t token_count() const {
    return static_cast<int64_t>(header_.token_count);
  }
  int64_t vocab_size() const {
    return static_cast<int64_t>(header_.vocab_size);
  }
  const TokenShardHeader& header() const { return header_; }
  const std::string& path() const { return path_; }

 private:
  TokenShardReader(std::string path, int fd, const TokenShardHeader& header)
      : path_(std::move(path)), fd_(fd), header_(header) {}
  // Verifies the payload's checksum, and that every id is inside the
  // vocabulary.
  absl::Status VerifyChecksum() const;
  // DataLoss unless each of the `n` ids at `bytes` (token_bytes wide; the
  // first is token `first`) is below vocab_size.
  absl::Status CheckIds(const unsigned char* bytes, uint64_t n,
                        uint64_t first) const;
  // Reads exactly `n` bytes at `offset`.
  absl::Status ReadBytes(uint64_t offset, uint64_t n, void* dst) const;

  const std::string path_;
  const int fd_;
  const TokenShardHeader header_;
};

}  // namespace strata::train

#endif  // STRATA_TRAIN_DATA_TOKEN_SHARD_H_
