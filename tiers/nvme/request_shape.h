// request_shape.h: the NVMe request shapes strata accepts (block size, queue
// depth), checked in one place for every caller that takes them from a user:
// Store::Open, `strata bench`'s flags and a machine profile's fields.
#ifndef STRATA_TIERS_NVME_REQUEST_SHAPE_H_
#define STRATA_TIERS_NVME_REQUEST_SHAPE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace strata {

// The largest NVMe request: bounce chunks are a few of these, pinned.
inline constexpr uint64_t kMaxNvmeBlockBytes = uint64_t{64} << 20;
// The most requests in flight per ring or thread pool.
inline constexpr uint32_t kMaxNvmeQueueDepth = 4096;

// OK when `block_size_bytes` is a multiple of 4 KiB (O_DIRECT's unit) in
// [4 KiB, 64 MiB] and `queue_depth` is in [1, 4096]; otherwise
// InvalidArgument naming the setting as the user spelled it (`block_name`,
// `depth_name`: a flag such as "--block-size" or a profile key) and the
// accepted range.
absl::Status CheckNvmeRequestShape(uint64_t block_size_bytes,
                                   uint32_t queue_depth,
                                   std::string_view block_name,
                                   std::string_view depth_name);

}  // namespace strata

#endif  // STRATA_TIERS_NVME_REQUEST_SHAPE_H_
