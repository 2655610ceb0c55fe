// io_error.cc: the error statuses shared by the BlockIo engines (the mapping
// and why: io_error.h).
#include "tiers/nvme/io_error.h"

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace strata {

const char* IoOpName(IoOp op) { return op == IoOp::kRead ? "read" : "write"; }

namespace {

// What `errno_value` says, for the errnos the table in io_error.h singles out
// (strerror is not thread-safe).
const char* Describe(int errno_value) {
  switch (errno_value) {
    case EIO:
      return "I/O error (EIO)";
    case EAGAIN:
      return "resource temporarily unavailable (EAGAIN)";
    case EINTR:
      return "interrupted (EINTR)";
    case ENOMEM:
      return "out of kernel memory (ENOMEM)";
    case EBUSY:
      return "device busy (EBUSY)";
    case ENOSPC:
      return "no space left on device (ENOSPC)";
    case EDQUOT:
      return "disk quota exceeded (EDQUOT)";
    case EFBIG:
      return "file too large (EFBIG)";
  }
  return "";
}

}  // namespace

absl::Status IoErrnoToStatus(int errno_value, absl::string_view context) {
  switch (errno_value) {
    case EIO:
      return absl::UnavailableError(absl::StrCat(
          context, ": ", Describe(errno_value),
          ": the device failed the request; the tensor's last valid copy is "
          "intact, so retry, and check the disk (dmesg, smartctl) if it "
          "persists"));
    case EAGAIN:
    case EINTR:
    case ENOMEM:
    case EBUSY:
      return absl::UnavailableError(
          absl::StrCat(context, ": ", Describe(errno_value), ": retry"));
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return absl::ResourceExhaustedError(absl::StrCat(
          context, ": ", Describe(errno_value),
          ": the disk holding the swap file is full (its file system could "
          "not preallocate the file): free space on that disk or lower "
          "--nvme-budget"));
  }
  return absl::ErrnoToStatus(errno_value, context);
}

absl::Status IoErrnoStatus(const IoRequest& request, int errno_value) {
  return IoErrnoToStatus(
      errno_value,
      absl::StrCat("nvme ", IoOpName(request.op), " file ", request.file_index,
                   " offset ", request.offset, " (", request.bytes, " bytes)"));
}

absl::Status IoEofStatus(const IoRequest& request, uint64_t done) {
  return absl::OutOfRangeError(absl::StrCat(
      "nvme read file ", request.file_index, " offset ", request.offset,
      ": end of file after ", done, " of ", request.bytes, " bytes"));
}

}  // namespace strata
