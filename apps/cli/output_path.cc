// output_path.cc: see output_path.h.
#include "apps/cli/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"

namespace strata {

absl::Status CheckWritable(const std::string& path, const std::string& flag) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s=%s is a directory; give a file name", flag, path));
    }
    if (access(path.c_str(), W_OK) == 0) return absl::OkStatus();
  } else {
    // Create and remove it: the only test that also catches file systems
    // that refuse new files whatever the permissions say (/proc, /sys).
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
      close(fd);
      unlink(path.c_str());
      return absl::OkStatus();
    }
  }
  return absl::ErrnoToStatus(
      errno, absl::StrFormat("%s=%s cannot be written", flag, path));
}

namespace {

std::filesystem::path Normal(const std::string& path) {
  std::error_code error;
  std::filesystem::path p = std::filesystem::weakly_canonical(path, error);
  return error ? std::filesystem::absolute(path, error).lexically_normal() : p;
}

}  // namespace

absl::Status CheckDistinctFiles(const std::vector<FileFlag>& outputs,
                                const std::vector<FileFlag>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const FileFlag& out = outputs[i];
    if (out.path.empty()) continue;
    const std::filesystem::path p = Normal(out.path);
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && Normal(outputs[j].path) == p) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s and %s both name %s; give each output its own file", out.flag,
            outputs[j].flag, out.path));
      }
    }
    for (const FileFlag& in : inputs) {
      if (!in.path.empty() && Normal(in.path) == p) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s=%s is the file %s reads; write the output elsewhere", out.flag,
            out.path, in.flag));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace strata
