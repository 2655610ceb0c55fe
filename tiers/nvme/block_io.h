// block_io.h: the seam in front of all block I/O on the NVMe swap files.
//
// A BlockIo runs batches of aligned reads and writes on a fixed set of file
// descriptors (opened O_DIRECT by NvmeTier). Two engines: io_uring (registered
// buffers and files, short I/O resubmitted, -EAGAIN retried, completions
// reaped by the callers waiting for them, one at a time) and a pread/pwrite
// thread pool fallback. A fault-injecting wrapper
// (tiers/fault/) fits in front of either.
//
// Thread safety: Run may be called concurrently; callers share the queue
// depth.
#ifndef STRATA_TIERS_NVME_BLOCK_IO_H_
#define STRATA_TIERS_NVME_BLOCK_IO_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace strata {

// O_DIRECT alignment for buffers, offsets and lengths.
inline constexpr uint64_t kDirectIoAlignment = 4096;

enum class IoOp : uint8_t { kRead, kWrite };

struct IoRequest {
  IoOp op = IoOp::kRead;
  int file_index = 0;   // index into the fds the engine was opened with
  uint64_t offset = 0;  // bytes; multiple of kDirectIoAlignment
  void* buf = nullptr;  // aligned to kDirectIoAlignment
  uint64_t bytes = 0;   // multiple of kDirectIoAlignment
};

class BlockIo {
 public:
  virtual ~BlockIo() = default;
  // "io_uring" or "thread-pool".
  virtual std::string_view engine_name() const = 0;
  // Runs every request (concurrently, up to the queue depth) and returns when
  // all have finished. OK only if every byte moved. Errors map -errno by the
  // table in tiers/nvme/io_error.h, with the operation, file and offset in
  // the message (EIO -> Unavailable, ENOSPC -> ResourceExhausted "disk full",
  // EBADF -> FailedPrecondition); reaching end of file is OutOfRange.
  virtual absl::Status Run(absl::Span<const IoRequest> requests) = 0;

  // Run, handing each request to `on_done(i)` on the calling thread, in
  // request order, as soon as requests 0..i have all moved every byte, while
  // the later ones may still be in flight: how a reader hashes or copies one
  // piece while the disk reads the next. Returns when every request has
  // finished, with Run's status, or the first error `on_done` returned.
  // `on_done` is not called for the failed request nor any later one, nor
  // again once it has returned an error. Thread safety as Run. The default
  // runs Run, then `on_done` for each request (no overlap): engines that can
  // overlap override it.
  using OnDone = absl::FunctionRef<absl::Status(size_t index)>;
  virtual absl::Status RunInOrder(absl::Span<const IoRequest> requests,
                                  OnDone on_done);
};

// io_uring engine over `fds` with `queue_depth` entries. `buffers` are host
// regions to register as fixed buffers (requests whose buf lies inside one use
// READ_FIXED/WRITE_FIXED; others the plain ops). Fails (Unavailable, saying
// why) when io_uring cannot be set up here, e.g. blocked by seccomp.
absl::StatusOr<std::unique_ptr<BlockIo>> OpenUringBlockIo(
    const std::vector<int>& fds, uint32_t queue_depth,
    const std::vector<iovec>& buffers);

// pread/pwrite on `threads` threads. Always available.
absl::StatusOr<std::unique_ptr<BlockIo>> OpenThreadPoolBlockIo(
    const std::vector<int>& fds, uint32_t threads);

}  // namespace strata

#endif  // STRATA_TIERS_NVME_BLOCK_IO_H_
