// memory_block_io.h: MemoryBlockIo, a BlockIo engine whose files are byte
// vectors in memory, for tests that need block I/O but no disk (and for a
// fault wrapper to stand in front of without touching one).
//
// Policy: file i starts as `file_bytes` zero bytes, as a preallocated swap
// file does. A request moves its bytes with one memcpy under the engine's
// lock, so requests of concurrent Run calls never interleave within a
// request. Like the on-disk engines: a read past end of file reads what is
// there and returns OutOfRange (io_error.h's wording); a write past the end
// extends the file, as pwrite does; a file index out of range is
// InvalidArgument and fails the whole batch before anything moves; the other
// requests of a batch still run when one fails. Alignment is not checked:
// this engine has no O_DIRECT to refuse it.
//
// Thread safety: thread-safe.
#ifndef STRATA_TIERS_NVME_MEMORY_BLOCK_IO_H_
#define STRATA_TIERS_NVME_MEMORY_BLOCK_IO_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/sync.h"
#include "tiers/nvme/block_io.h"

namespace strata {

class MemoryBlockIo final : public BlockIo {
 public:
  // `files` files of `file_bytes` zero bytes each.
  MemoryBlockIo(int files, uint64_t file_bytes);
  MemoryBlockIo(const MemoryBlockIo&) = delete;
  MemoryBlockIo& operator=(const MemoryBlockIo&) = delete;

  // "memory".
  std::string_view engine_name() const override { return "memory"; }
  absl::Status Run(absl::Span<const IoRequest> requests) override;

  // A copy of file `index`'s bytes (empty for an index out of range), to
  // check what reached the "disk".
  std::vector<std::byte> Contents(int index) const;

 private:
  absl::Status RunOne(const IoRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::vector<std::vector<std::byte>> files_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_TIERS_NVME_MEMORY_BLOCK_IO_H_
