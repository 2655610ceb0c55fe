// nvme_tier.h: NvmeTier, the NVMe tier's swap files and striped block I/O.
//
// Policy: one swap file per configured directory, preallocated at open
// (fallocate) to budget / directories bytes, opened O_DIRECT | O_NOFOLLOW with
// mode 0600 and O_TMPFILE (or unlinked at once where the file system lacks
// O_TMPFILE), so nothing is left behind on exit or crash. The tier presents
// one linear address space striped across the files in units of the block
// size: address a lies in file (a / block) % n at offset
// (a / block / n) * block + a % block. Reads and writes are split at block
// boundaries into requests that run together through the BlockIo engine.
//
// Thread safety: Read and Write may be called concurrently.
#ifndef STRATA_TIERS_NVME_NVME_TIER_H_
#define STRATA_TIERS_NVME_NVME_TIER_H_

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/options.h"
#include "tiers/nvme/block_io.h"
#include "tiers/nvme/retrying_block_io.h"

namespace strata {

// OK when `dir` is an existing directory this user may write: NotFound
// (missing), InvalidArgument (not a directory) or PermissionDenied
// otherwise, each naming --nvme-dir. What NvmeTier::Open checks first; a
// command may check it before long work that comes before opening a store.
absl::Status CheckNvmeDirectory(const std::string& dir);

class NvmeTier {
 public:
  // Wraps the engine NvmeTier opened (tests put a fault injector here); the
  // retries (NvmeOptions::io_attempts) run in front of what it returns.
  using BlockIoWrapper =
      std::function<std::unique_ptr<BlockIo>(std::unique_ptr<BlockIo>)>;

  // Creates the swap files and the I/O engine. `buffers` are the host regions
  // I/O will use (registered with io_uring). Errors: InvalidArgument (no
  // directories, budget 0, block size not a multiple of 4096, queue depth 0),
  // NotFound / PermissionDenied for a missing or unwritable directory,
  // ResourceExhausted when a file system lacks the space, with the directory
  // and the bytes asked and free in the message.
  static absl::StatusOr<std::unique_ptr<NvmeTier>> Open(
      const NvmeOptions& options, const std::vector<iovec>& buffers,
      BlockIoWrapper wrapper = nullptr);
  ~NvmeTier();  // closes (and so deletes) the swap files
  NvmeTier(const NvmeTier&) = delete;
  NvmeTier& operator=(const NvmeTier&) = delete;

  // Moves `bytes` between the tier address `address` and host memory `buf`.
  // address, buf and bytes must be multiples of kDirectIoAlignment
  // (InvalidArgument otherwise; OutOfRange past capacity). Blocks until done.
  // I/O errors as tiers/nvme/io_error.h maps them, once the retries are
  // spent: Unavailable for EIO, ResourceExhausted naming the directory when
  // its disk is full. A failed
  // read leaves `buf` undefined; a failed write, the bytes at `address`.
  absl::Status Read(uint64_t address, void* buf, uint64_t bytes);
  absl::Status Write(uint64_t address, const void* buf, uint64_t bytes);

  // Requests run again after a transient error (RetryingBlockIo::retries).
  uint64_t io_retries() const { return retrying_->retries(); }
  // Whether failed reads are tried again (NvmeOptions::io_attempts > 1).
  bool retries_enabled() const { return attempts_ > 1; }

  uint64_t capacity_bytes() const { return capacity_; }
  uint64_t block_size_bytes() const { return block_; }
  std::string_view engine_name() const { return io_->engine_name(); }
  // Why the thread-pool engine was chosen, or "" for io_uring.
  const std::string& fallback_reason() const { return fallback_reason_; }
  // "<dir> (<bytes>)" per swap file, for `strata info`.
  std::vector<std::string> DescribeFiles() const;

 private:
  NvmeTier() = default;
  absl::Status Transfer(IoOp op, uint64_t address, void* buf, uint64_t bytes);
  absl::Status NameFullDisk(const absl::Status& status,
                            absl::Span<const IoRequest> requests) const;

  std::vector<int> fds_;
  std::vector<std::string> dirs_;
  uint64_t per_file_bytes_ = 0;
  uint64_t capacity_ = 0;
  uint64_t block_ = 0;
  uint32_t attempts_ = 1;
  std::unique_ptr<BlockIo> io_;
  RetryingBlockIo* retrying_ = nullptr;  // io_ itself
  std::string fallback_reason_;
};

}  // namespace strata

#endif  // STRATA_TIERS_NVME_NVME_TIER_H_
