// cpu_linear16.h: the 16-bit linear layers of Compute::LinearForward16 and
// LinearBackward16 (compute.h) on the host, what CpuCompute runs.
//
// Debian's OpenBLAS 0.3.21 has no bf16 GEMM (sbgemm) and none has an fp16
// one, so each product is tiled: blocks of at most kLinear16Tile x
// kLinear16Tile of each operand are rounded to 16 bits (fp32 activations
// and gradients) or widened from them (weights) into per-thread scratch and
// multiplied with sgemm, the tiles of the inner dimension accumulated in
// order. The scratch is two tiles (2 x 256 KiB) per calling thread, never a
// whole-tensor fp32 copy. Widening is exact and sgemm sums in fp32, so the
// result is the fp32 product of the 16-bit values. The tiling depends on
// the shapes alone, so a result's bits do too (for a fixed OpenBLAS, which
// splits an sgemm by output blocks, not the inner dimension).
#ifndef STRATA_TRAIN_CPU_LINEAR16_H_
#define STRATA_TRAIN_CPU_LINEAR16_H_

#include <cstdint>

#include "absl/status/status.h"
#include "train/precision.h"

namespace strata::train {

// Rows, columns and inner-dimension length of one tile.
inline constexpr int64_t kLinear16Tile = 256;

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

#endif  // STRATA_TRAIN_CPU_LINEAR16_H_
