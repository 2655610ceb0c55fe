// atomic_file.h: file writes that never leave a partial file under the final
// name (write a temporary beside it, fsync, rename), and the reads that go
// with them. The cache files of the language-model data pipeline (tokenizer
// models, split text, token shards) are all written this way, so a crash or
// a full disk leaves either the old state or the new one.
#ifndef STRATA_TRAIN_IO_ATOMIC_FILE_H_
#define STRATA_TRAIN_IO_ATOMIC_FILE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata::train {

// A name beside `path` unique to this process and call
// ("<path>.tmp.<pid>.<n>"), for a file that is renamed to `path` when done.
std::string TemporaryPathFor(const std::string& path);

// Creates `temp` (which must not exist) for writing, mode 0644; returns its
// descriptor. Errors: errno's code, naming the file and what to check.
absl::StatusOr<int> CreateTemporaryFile(const std::string& temp);

// Flushes `fd` to disk, closes it and renames `temp_path` to `path`; on any
// failure removes `temp_path` and returns the errno status naming `path`.
// Closes `fd` in every case.
absl::Status CommitTemporary(int fd, const std::string& temp_path,
                             const std::string& path);

// Streams bytes into a temporary and publishes it as `path` on Commit.
// Not thread-safe.
class AtomicFileWriter {
 public:
  // Errno codes naming the temporary if it cannot be created.
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Create(
      const std::string& path);
  // Removes the temporary unless Commit succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Buffers `bytes`, writing when the buffer fills. Errno codes (ENOSPC for
  // a disk that takes nothing) name the file; the writer is then spent.
  absl::Status Append(std::string_view bytes);
  // Writes what is buffered, syncs and renames. The writer is then spent.
  absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}
  absl::Status Flush();
  void Abandon();

  const std::string path_, temp_path_;
  int fd_;  // -1 once spent
  std::string buffer_;
};

// Writes `bytes` as the whole content of `path`, atomically as above.
absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes);

// The whole content of `path` (meant for small files: models, not corpora).
// NotFound if it does not exist; other errno codes; each names `path`.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Creates `dir` and its parents if missing. Errors name `dir`.
absl::Status MakeDirectories(const std::string& dir);

}  // namespace strata::train

#endif  // STRATA_TRAIN_IO_ATOMIC_FILE_H_
