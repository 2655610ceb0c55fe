// token_shard_writer.cc: streams tokens into a temporary file beside the
// shard from offset 48 on, checksumming the payload as it goes, then writes
// the header into the hole left at offset 0 and renames the temporary into
// place.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/xxh3.h"
#include "strata/status.h"
#include "train/data/token_shard.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

// Writes all `n` bytes at `offset`; errno (ENOSPC for a zero write) or 0.
int PwriteAll(int fd, const unsigned char* p, size_t n, off_t offset) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : ENOSPC;
    p += w;
    n -= static_cast<size_t>(w);
    offset += w;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenShardWriter>> TokenShardWriter::Create(
    const std::string& path, int64_t vocab_size, uint64_t vocab_id) {
  if (vocab_size < 1 || vocab_size > kMaxTokenShardVocab) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token shard %s: vocabulary size %d is outside [1, 2^31]", path,
        vocab_size));
  }
  std::string temp = TemporaryPathFor(path);
  STRATA_ASSIGN_OR_RETURN(const int fd, CreateTemporaryFile(temp));
  return std::unique_ptr<TokenShardWriter>(
      new TokenShardWriter(path, std::move(temp), fd, vocab_size, vocab_id));
}

TokenShardWriter::TokenShardWriter(std::string path, std::string temp_path,
                                   int fd, int64_t vocab_size,
                                   uint64_t vocab_id)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      vocab_size_(vocab_size),
      vocab_id_(vocab_id),
      width_(TokenWidthFor(vocab_size)),
      fd_(fd),
      checksum_(XXH3_createState()) {
  XXH3_64bits_reset(checksum_);
  buffer_.reserve(kBufferBytes);
}

TokenShardWriter::~TokenShardWriter() {
  if (fd_ >= 0) Abandon();
  XXH3_freeState(checksum_);
}

absl::Status TokenShardWriter::Append(std::span<const int32_t> tokens) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "token shard %s is finished or failed; start a new writer", path_));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token shard %s: token %d is outside the vocabulary [0, %d)", path_,
          t, vocab_size_));
    }
  }
  for (int32_t t : tokens) {
    const uint32_t v = static_cast<uint32_t>(t);
    unsigned char bytes[4];
    std::memcpy(bytes, &v, 4);  // little-endian host (token_shard.cc)
    buffer_.insert(buffer_.end(), bytes, bytes + width_);
    if (buffer_.size() + 4 > kBufferBytes) STRATA_RETURN_IF_ERROR(Flush());
  }
  count_ += tokens.size();
  return absl::OkStatus();
}

absl::Status TokenShardWriter::Flush() {
  XXH3_64bits_update(checksum_, buffer_.data(), buffer_.size());
  const int err = PwriteAll(fd_, buffer_.data(), buffer_.size(),
                            static_cast<off_t>(written_));
  written_ += buffer_.size();
  buffer_.clear();
  if (err == 0) return absl::OkStatus();
  Abandon();
  return absl::ErrnoToStatus(
      err, absl::StrFormat("cannot write token shard %s (check the disk "
                           "space there)",
                           temp_path_));
}

void TokenShardWriter::Abandon() {
  close(fd_);
  unlink(temp_path_.c_str());
  fd_ = -1;
}

absl::Status TokenShardWriter::Finish() {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "token shard %s is finished or failed; start a new writer", path_));
  }
  STRATA_RETURN_IF_ERROR(Flush());
  TokenShardHeader header;
  header.token_bytes = width_;
  header.token_count = count_;
  header.vocab_size = static_cast<uint64_t>(vocab_size_);
  header.vocab_id = vocab_id_;
  header.checksum = XXH3_64bits_digest(checksum_);
  const auto bytes = EncodeTokenShardHeader(header);
  if (const int err = PwriteAll(fd_, bytes.data(), bytes.size(), 0)) {
    Abandon();
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot write token shard %s (check the disk "
                             "space there)",
                             temp_path_));
  }
  const int fd = fd_;
  fd_ = -1;  // CommitTemporary closes it and removes the temporary on error
  return CommitTemporary(fd, temp_path_, path_);
}

}  // namespace strata::train
