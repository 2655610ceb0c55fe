// memory_block_io.cc: MemoryBlockIo, block I/O on in-memory files (policy in
// memory_block_io.h).
#include "tiers/nvme/memory_block_io.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tiers/nvme/io_error.h"

namespace strata {

MemoryBlockIo::MemoryBlockIo(int files, uint64_t file_bytes)
    : files_(static_cast<size_t>(std::max(files, 0)),
             std::vector<std::byte>(file_bytes)) {}

absl::Status MemoryBlockIo::Run(absl::Span<const IoRequest> requests) {
  MutexLock lock(&mu_);
  for (const IoRequest& r : requests) {
    if (r.file_index < 0 || static_cast<size_t>(r.file_index) >= files_.size())
      return absl::InvalidArgumentError(
          absl::StrCat("nvme ", IoOpName(r.op), ": file index ", r.file_index,
                       " out of range [0, ", files_.size(), ")"));
  }
  absl::Status first;
  for (const IoRequest& r : requests) first.Update(RunOne(r));
  return first;
}

absl::Status MemoryBlockIo::RunOne(const IoRequest& request) {
  std::vector<std::byte>& file = files_[request.file_index];
  auto* buf = static_cast<std::byte*>(request.buf);
  if (request.bytes == 0) return absl::OkStatus();
  if (request.op == IoOp::kWrite) {
    if (request.offset + request.bytes > file.size()) {
      file.resize(request.offset + request.bytes);
    }
    std::memcpy(file.data() + request.offset, buf, request.bytes);
    return absl::OkStatus();
  }
  const uint64_t there =
      request.offset >= file.size()
          ? 0
          : std::min<uint64_t>(request.bytes, file.size() - request.offset);
  if (there > 0) std::memcpy(buf, file.data() + request.offset, there);
  if (there < request.bytes) return IoEofStatus(request, there);
  return absl::OkStatus();
}

std::vector<std::byte> MemoryBlockIo::Contents(int index) const {
  MutexLock lock(&mu_);
  if (index < 0 || static_cast<size_t>(index) >= files_.size()) return {};
  return files_[index];
}

}  // namespace strata
