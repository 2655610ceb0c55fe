// io_error.cc: the error statuses shared by the BlockIo engines.
#include "tiers/nvme/io_error.h"

#include "absl/strings/str_cat.h"

namespace strata {

const char* IoOpName(IoOp op) { return op == IoOp::kRead ? "read" : "write"; }

absl::Status IoErrnoStatus(const IoRequest& request, int errno_value) {
  return absl::ErrnoToStatus(
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
