// request_shape.cc: the NVMe block size and queue depth limits.
#include "tiers/nvme/request_shape.h"

#include "absl/strings/str_format.h"
#include "tiers/nvme/block_io.h"

namespace strata {

absl::Status CheckNvmeRequestShape(uint64_t block_size_bytes,
                                   uint32_t queue_depth,
                                   std::string_view block_name,
                                   std::string_view depth_name) {
  if (block_size_bytes == 0 || block_size_bytes % kDirectIoAlignment != 0 ||
      block_size_bytes > kMaxNvmeBlockBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s=%d: the NVMe block size must be a multiple of 4 KiB, from 4 KiB "
        "to 64 MiB",
        block_name, block_size_bytes));
  }
  if (queue_depth == 0 || queue_depth > kMaxNvmeQueueDepth) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s=%d: the NVMe queue depth must be 1 to %d",
                        depth_name, queue_depth, kMaxNvmeQueueDepth));
  }
  return absl::OkStatus();
}

}  // namespace strata
