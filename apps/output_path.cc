// output_path.cc: see output_path.h.
#include "apps/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace strata
