// io_error.h: the statuses every BlockIo engine (and the fault injector)
// returns for a failed request, so that all engines word errors alike. This
// is the one place the NVMe errno mapping is decided; the codes follow what
// the caller should do (DESIGN.md, Errors):
//
//   errno of a request                   code               the caller should
//   -----------------------------------  -----------------  ------------------
//   EIO; a write that makes no progress  Unavailable        retry; check the
//   EAGAIN/EINTR past the retries,       Unavailable        disk if it lasts
//     ENOMEM, EBUSY
//   ENOSPC, EDQUOT, EFBIG                ResourceExhausted  free disk space or
//                                        ("disk full")      lower --nvme-budget
//   read past end of file                OutOfRange         (a store bug)
//   anything else (EBADF, EINVAL, ...)   absl::ErrnoToStatus's code
//
// Why EIO is Unavailable: the kernel returns EIO for a failure the device or
// its path could not recover from on that attempt (a media error, a command
// timeout, a controller reset, a lost path). The store leaves the last valid
// copy of a tensor untouched when a transfer fails, so nothing the caller
// relies on changed and the same call may be retried as is: that is
// Unavailable ("transient, retry"). It is not DataLoss, which strata keeps
// for data known to be corrupt (a checksum mismatch) — an EIO loses no byte
// — nor Internal, since no invariant of strata broke. A disk that keeps
// failing keeps answering Unavailable with the file and offset in the
// message, which is where to look.
//
// Why a full disk is ResourceExhausted, and how it differs from a full tier:
// the swap files are preallocated, so ENOSPC during a transfer means the file
// system could not preallocate (the file is sparse there) and has since
// filled up. Abseil files "the file system is out of space" under
// ResourceExhausted, and so does NvmeTier::Open; the message names the disk
// and says "free space on it or lower --nvme-budget", never "tier full".
// Unlike a tier with no evictable room, which the store reports as a skipped
// prefetch, a prefetch that ends in a full disk is counted as failed
// (PrefetchStats::failed).
//
// Internal to tiers/; not part of the public API.
#ifndef STRATA_TIERS_NVME_IO_ERROR_H_
#define STRATA_TIERS_NVME_IO_ERROR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tiers/nvme/block_io.h"

namespace strata {

// "read" or "write".
const char* IoOpName(IoOp op);

// The status for an NVMe request failing with `errno_value`, by the table
// above; `context` says which request ("nvme write file 0 offset 4096 ...").
absl::Status IoErrnoToStatus(int errno_value, absl::string_view context);

// The status for request `request` failing with `errno_value`.
absl::Status IoErrnoStatus(const IoRequest& request, int errno_value);

// The status for a read that reached end of file after `done` of the
// request's bytes.
absl::Status IoEofStatus(const IoRequest& request, uint64_t done);

}  // namespace strata

#endif  // STRATA_TIERS_NVME_IO_ERROR_H_
