// atomic_file.cc: temporary-and-rename writes with POSIX calls.
#include "train/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"
#include "strata/status.h"

namespace strata::train {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

absl::Status WriteError(int err, const std::string& path) {
  return absl::ErrnoToStatus(
      err, absl::StrFormat("cannot write %s (check the disk space and "
                           "permissions there)",
                           path));
}

}  // namespace

std::string TemporaryPathFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrFormat("%s.tmp.%d.%d", path, getpid(), counter++);
}

absl::Status CommitTemporary(int fd, const std::string& temp_path,
                             const std::string& path) {
  int err = fsync(fd) == 0 ? 0 : errno;
  if (close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && rename(temp_path.c_str(), path.c_str()) != 0) err = errno;
  if (err == 0) return absl::OkStatus();
  unlink(temp_path.c_str());
  return WriteError(err, path);
}

absl::StatusOr<int> CreateTemporaryFile(const std::string& temp) {
  const int fd =
      open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(
        err,
        absl::StrFormat("cannot create a file in %s (check the "
                        "permissions of that directory, or write "
                        "elsewhere)",
                        std::filesystem::path(temp).parent_path().string()));
  }
  return fd;
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(
    const std::string& path) {
  std::string temp = TemporaryPathFor(path);
  STRATA_ASSIGN_OR_RETURN(const int fd, CreateTemporaryFile(temp));
  return std::unique_ptr<AtomicFileWriter>(
      new AtomicFileWriter(path, std::move(temp), fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) Abandon();
}

void AtomicFileWriter::Abandon() {
  close(fd_);
  unlink(temp_path_.c_str());
  fd_ = -1;
}

absl::Status AtomicFileWriter::Append(std::string_view bytes) {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is already committed or failed", path_));
  }
  buffer_.append(bytes);
  return buffer_.size() >= kBufferBytes ? Flush() : absl::OkStatus();
}

absl::Status AtomicFileWriter::Flush() {
  std::string_view rest = buffer_;
  while (!rest.empty()) {
    const ssize_t n = write(fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      Abandon();
      return WriteError(err, path_);
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s is already committed or failed", path_));
  }
  STRATA_RETURN_IF_ERROR(Flush());
  const int fd = fd_;
  fd_ = -1;  // CommitTemporary closes it and removes the temporary on error
  return CommitTemporary(fd, temp_path_, path_);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> writer,
                          AtomicFileWriter::Create(path));
  STRATA_RETURN_IF_ERROR(writer->Append(bytes));
  return writer->Commit();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrFormat("cannot open %s", path));
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrFormat("cannot read %s", path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status MakeDirectories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return absl::OkStatus();
  return absl::ErrnoToStatus(
      ec.value(), absl::StrFormat("cannot create the directory %s (check its "
                                  "parent's permissions, or write elsewhere)",
                                  dir));
}

}  // namespace strata::train
