// io_error.h: the statuses every BlockIo engine (and the fault injector)
// returns for a failed request, so that all engines word errors alike.
//
// Policy: an -errno becomes absl::ErrnoToStatus(errno, "nvme <op> file <i>
// offset <x>") (ENOSPC -> ResourceExhausted, EIO -> Unknown, EBADF ->
// FailedPrecondition, ...); reading past end of file is OutOfRange.
// Internal to tiers/; not part of the public API.
#ifndef STRATA_TIERS_NVME_IO_ERROR_H_
#define STRATA_TIERS_NVME_IO_ERROR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "tiers/nvme/block_io.h"

namespace strata {

// "read" or "write".
const char* IoOpName(IoOp op);

// The status for request `request` failing with `errno_value`.
absl::Status IoErrnoStatus(const IoRequest& request, int errno_value);

// The status for a read that reached end of file after `done` of the
// request's bytes.
absl::Status IoEofStatus(const IoRequest& request, uint64_t done);

}  // namespace strata

#endif  // STRATA_TIERS_NVME_IO_ERROR_H_
