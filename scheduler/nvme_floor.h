// nvme_floor.h: the fewest bytes a step must read from NVMe.
//
// With a cyclic step trace, a tensor's contents are live between two of its
// accesses when the later one needs them (a read or a write, not an
// overwrite: activations and gradients die at their Discard). At the step's
// fullest point the live bytes beyond what fits above NVMe (the device and
// host budgets) are on NVMe only, and each is needed again: every step reads
// at least that much from NVMe, whatever the scheduler does. Reports set it
// beside the bytes actually read (issue 14 item 3).
//
// Thread safety: a pure function.
#ifndef STRATA_SCHEDULER_NVME_FLOOR_H_
#define STRATA_SCHEDULER_NVME_FLOOR_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "scheduler/access_trace.h"
#include "strata/tensor.h"

namespace strata {

// Bytes of tensor `id` (0: unknown, not counted).
using TensorBytes = absl::FunctionRef<uint64_t(TensorId id)>;

// The live bytes at the fullest point of `trace` (replayed in a cycle) less
// `above_nvme_bytes`, or 0 when they fit.
uint64_t NvmeReadFloorBytes(const Trace& trace, TensorBytes bytes_of,
                            uint64_t above_nvme_bytes);

}  // namespace strata

#endif  // STRATA_SCHEDULER_NVME_FLOOR_H_
