// cpu_linear16.h: the 16-bit linear layers of Compute::LinearForward16 and
// LinearBackward16 (compute.h) on the host, what CpuCompute runs.
//
// Debian's OpenBLAS 0.3.21 has no bf16 GEMM (sbgemm) and none has an fp16
// one, so each product is tiled: blocks of at most kLinear16Tile x
// kLinear16Tile of each operand are rounded to 16 bits (fp32 activations
// and gradients) or widened from them (weights) into per-thread scratch and
// multiplied with sgemm, the tiles of the inner dimension accumulated in
// order. The scratch is two 16 KiB tiles per thread, never a whole-tensor
// fp32 copy. Widening is exact and sgemm sums in fp32, so the result is
// the fp32 product of the 16-bit values.
//
// Determinism at any thread count: the output tiles are spread over the
// shared HostPool, and each tile's sgemm is small enough (64^3 = 2^18
// multiply-adds) that OpenBLAS 0.3.21 runs it on the calling thread alone
// (it threads a GEMM only above SMP_THRESHOLD_MIN x
// GEMM_MULTITHREAD_THRESHOLD = 2^18), so every tile is computed the same
// way whichever thread runs it and however many OpenBLAS or pool threads
// there are (linear16_test checks 1 against 2). The cost: tiles are
// converted once per use, about 1/32 of a conversion per multiply-add.
#ifndef STRATA_TRAIN_COMPUTE_CPU_CPU_LINEAR16_H_
#define STRATA_TRAIN_COMPUTE_CPU_CPU_LINEAR16_H_

#include <cstdint>

#include "absl/status/status.h"
#include "train/compute/precision.h"

namespace strata::train {

// Rows, columns and inner-dimension length of one tile: 64^3 multiply-adds
// at most, OpenBLAS's single-thread limit (above).
inline constexpr int64_t kLinear16Tile = 64;
// A product is split over the pool's threads only in runs of this many
// output tiles (about 50 us of sgemm each): a split's wake-up costs a few
// microseconds (cpu_adam.h).
inline constexpr int64_t kLinear16MinTilesPerThread = 2;

// Compute::LinearForward16 and LinearBackward16 on host memory; the same
// contract and errors.
absl::Status Linear16ForwardCpu(Precision type, const float* x,
                                const uint16_t* w, const uint16_t* bias,
                                float* y, int64_t batch, int64_t in,
                                int64_t out);
absl::Status Linear16BackwardCpu(Precision type, const float* x,
                                 const uint16_t* w, const float* dy, float* dw,
                                 float* db, float* dx, int64_t batch,
                                 int64_t in, int64_t out, bool accumulate);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_CPU_LINEAR16_H_
