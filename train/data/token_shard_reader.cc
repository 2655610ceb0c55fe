// token_shard_reader.cc: opens a shard (header checks, then one streaming
// pass for the checksum) and reads token ranges with pread, one bounded
// buffer at a time, widening the stored 2- or 4-byte ids to int32.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/data/token_shard.h"

namespace strata::train {
namespace {

constexpr uint64_t kChunkBytes = uint64_t{1} << 20;  // checksum pass
constexpr int64_t kReadChunkTokens = 8192;           // Read's stack buffer

absl::Status Rebuild(absl::StatusCode code, const std::string& path,
                     const std::string& what) {
  return absl::Status(
      code, absl::StrFormat(
                "%s shard %s: %s; delete it to rebuild",
                code == absl::StatusCode::kDataLoss ? "corrupt" : "unusable",
                path, what));
}

// The header's own consistency and its match with the file's size.
absl::Status CheckLayout(const std::string& path, const TokenShardHeader& h,
                         uint64_t file_bytes) {
  if (h.version != kTokenShardVersion) {
    return Rebuild(absl::StatusCode::kFailedPrecondition, path,
                   absl::StrFormat("format version %d, this strata reads "
                                   "version %d",
                                   h.version, kTokenShardVersion));
  }
  // Found by the token_shard fuzz target: a vocabulary past 2^31 let ids
  // past int32 through, read back negative.
  if (h.vocab_size < 1 ||
      h.vocab_size > static_cast<uint64_t>(kMaxTokenShardVocab)) {
    return Rebuild(
        absl::StatusCode::kDataLoss, path,
        absl::StrFormat("vocabulary size %d, outside [1, 2^31]", h.vocab_size));
  }
  if ((h.token_bytes != 2 && h.token_bytes != 4) ||
      h.token_bytes < TokenWidthFor(static_cast<int64_t>(h.vocab_size))) {
    return Rebuild(absl::StatusCode::kDataLoss, path,
                   absl::StrFormat("token width %d for vocabulary size %d",
                                   h.token_bytes, h.vocab_size));
  }
  const uint64_t payload = file_bytes - kTokenShardHeaderBytes;
  if (payload / h.token_bytes != h.token_count ||
      payload % h.token_bytes != 0) {
    return Rebuild(absl::StatusCode::kDataLoss, path,
                   absl::StrFormat(
                       "truncated or overlong: %d bytes, the header "
                       "promises %d tokens of %d bytes (%d bytes)",
                       file_bytes, h.token_count, h.token_bytes,
                       kTokenShardHeaderBytes + h.token_count * h.token_bytes));
  }
  return absl::OkStatus();
}

absl::Status CheckVocabulary(const std::string& path, const TokenShardHeader& h,
                             int64_t vocab_size, uint64_t vocab_id) {
  if (h.vocab_size == static_cast<uint64_t>(vocab_size) &&
      h.vocab_id == vocab_id) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "token shard %s was built with vocabulary %016x (%d ids); the model "
      "has %016x (%d ids): delete it to rebuild, or choose the tokenizer it "
      "was built with",
      path, h.vocab_id, h.vocab_size, vocab_id, vocab_size));
}

// Reads the header of the open `fd`; DataLoss if short or not a shard.
absl::StatusOr<TokenShardHeader> ReadHeader(const std::string& path, int fd,
                                            uint64_t file_bytes) {
  std::array<unsigned char, kTokenShardHeaderBytes> bytes;
  TokenShardHeader header;
  if (file_bytes < kTokenShardHeaderBytes ||
      pread(fd, bytes.data(), bytes.size(), 0) !=
          static_cast<ssize_t>(bytes.size())) {
    return Rebuild(absl::StatusCode::kDataLoss, path,
                   absl::StrFormat("%d bytes, shorter than the %d-byte header",
                                   file_bytes, kTokenShardHeaderBytes));
  }
  if (!DecodeTokenShardHeader(bytes, &header)) {
    return Rebuild(absl::StatusCode::kDataLoss, path,
                   "bad magic, not a strata token shard");
  }
  return header;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenShardReader>> TokenShardReader::Open(
    const std::string& path, int64_t expected_vocab_size,
    uint64_t expected_vocab_id) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot open token shard %s", path));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot stat token shard %s", path));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  absl::StatusOr<TokenShardHeader> header = ReadHeader(path, fd, file_bytes);
  if (!header.ok()) {
    close(fd);
    return header.status();
  }
  // The reader owns fd from here: every return below closes it.
  std::unique_ptr<TokenShardReader> reader(
      new TokenShardReader(path, fd, *header));
  STRATA_RETURN_IF_ERROR(CheckLayout(path, *header, file_bytes));
  STRATA_RETURN_IF_ERROR(
      CheckVocabulary(path, *header, expected_vocab_size, expected_vocab_id));
  STRATA_RETURN_IF_ERROR(reader->VerifyChecksum());
  return reader;
}

TokenShardReader::~TokenShardReader() { close(fd_); }

absl::Status TokenShardReader::ReadBytes(uint64_t offset, uint64_t n,
                                         void* dst) const {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const ssize_t r = pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      return absl::ErrnoToStatus(
          err, absl::StrFormat("cannot read token shard %s", path_));
    }
    if (r == 0) {
      return Rebuild(absl::StatusCode::kDataLoss, path_,
                     "the file shrank after it was opened");
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

absl::Status TokenShardReader::CheckIds(const unsigned char* bytes, uint64_t n,
                                        uint64_t first) const {
  const uint32_t width = header_.token_bytes;
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    std::memcpy(&v, bytes + i * width, width);  // little-endian host
    if (v >= header_.vocab_size) {
      return Rebuild(absl::StatusCode::kDataLoss, path_,
                     absl::StrFormat("token %d is id %d, outside its "
                                     "vocabulary of %d",
                                     first + i, v, header_.vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status TokenShardReader::VerifyChecksum() const {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(
      XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  std::vector<unsigned char> chunk(kChunkBytes);
  absl::Status bad_id;
  const uint64_t end =
      kTokenShardHeaderBytes + header_.token_count * header_.token_bytes;
  for (uint64_t at = kTokenShardHeaderBytes; at < end; at += kChunkBytes) {
    const uint64_t n = std::min(kChunkBytes, end - at);
    STRATA_RETURN_IF_ERROR(ReadBytes(at, n, chunk.data()));
    XXH3_64bits_update(state.get(), chunk.data(), n);
    // A shard whose checksum holds may still have been made by hand: an id
    // past the vocabulary would index past the embedding table. The first
    // such id is told only when the checksum holds (a flipped bit is told
    // as the mismatch it is).
    if (bad_id.ok()) {
      bad_id = CheckIds(chunk.data(), n / header_.token_bytes,
                        (at - kTokenShardHeaderBytes) / header_.token_bytes);
    }
  }
  if (XXH3_64bits_digest(state.get()) != header_.checksum) {
    return Rebuild(absl::StatusCode::kDataLoss, path_, "checksum mismatch");
  }
  return bad_id;
}

absl::Status TokenShardReader::Read(int64_t first, int64_t count,
                                    int32_t* out) const {
  if (first < 0 || count < 0 || first > token_count() - count) {
    return absl::OutOfRangeError(
        absl::StrFormat("token shard %s: tokens [%d, %d) are outside [0, %d)",
                        path_, first, first + count, token_count()));
  }
  const uint32_t width = header_.token_bytes;
  unsigned char buf[kReadChunkTokens * 4];
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(kReadChunkTokens, count - done);
    STRATA_RETURN_IF_ERROR(
        ReadBytes(kTokenShardHeaderBytes + uint64_t(first + done) * width,
                  uint64_t(n) * width, buf));
    // Checked again: the file may have changed since Open.
    STRATA_RETURN_IF_ERROR(CheckIds(buf, uint64_t(n), uint64_t(first + done)));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t v = 0;
      std::memcpy(&v, buf + i * width, width);  // little-endian host
      out[done + i] = static_cast<int32_t>(v);
    }
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace strata::train
