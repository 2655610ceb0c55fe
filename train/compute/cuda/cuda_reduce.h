// cuda_reduce.h: grid-stride indexing and the fixed-shape reductions the
// transformer kernels (cuda_transformer_kernels.cu, cuda_attention_kernels.cu)
// share. Every reduction here has the same shape on every call, whatever the
// data or the launch, so it gives the same bits every run; none uses atomics.
//
// Device code: include only from .cu files (STRATA_HAVE_CUDA builds).
#ifndef STRATA_TRAIN_COMPUTE_CUDA_CUDA_REDUCE_H_
#define STRATA_TRAIN_COMPUTE_CUDA_CUDA_REDUCE_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace strata::train::kernels {

inline constexpr int kBlockThreads = 256;
// Grid-stride loops cover the rest; 8192 blocks of 256 fill any current GPU.
inline constexpr int64_t kMaxBlocks = 8192;
// Threads of a row-per-block kernel (a power of 2, for BlockReduce's tree).
inline constexpr int kRowThreads = 256;
inline constexpr int64_t kMaxRowBlocks = 65535;
inline constexpr int kWarpSize = 32;

// Blocks of kBlockThreads for a thread per element of n.
inline int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(
      (n + kBlockThreads - 1) / kBlockThreads, 1, kMaxBlocks));
}
// Blocks of kRowThreads for a block per row.
inline int RowBlocks(int64_t rows) {
  return static_cast<int>(std::clamp<int64_t>(rows, 1, kMaxRowBlocks));
}

__device__ inline int64_t GridIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
// The warp-per-row kernels' row loop: this warp's first row, and the step.
__device__ inline int64_t WarpIndex() { return GridIndex() / kWarpSize; }
__device__ inline int64_t WarpStride() { return GridStride() / kWarpSize; }
__device__ inline int Lane() {
  return static_cast<int>(threadIdx.x % kWarpSize);
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ long long operator()(long long a, long long b) const {
    return min(a, b);
  }
};

// v combined over the block's kRowThreads threads by a fixed tree (thread t
// takes t + s for s = 128, 64, ..., 1); every thread gets the result.
// `shared` holds kRowThreads values and is free again on return. Every
// thread of the block must call it (a block-uniform branch only).
template <typename T, typename Op>
__device__ T BlockReduce(T v, T* shared, Op op) {
  const int t = threadIdx.x;
  shared[t] = v;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s >>= 1) {
    if (t < s) shared[t] = op(shared[t], shared[t + s]);
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // before anyone writes shared again
  return result;
}

// Butterfly sum over the warp: at each step lane i adds lane i ^ o's value,
// and since a + b and b + a are the same bits, every lane ends with the same
// sum. Every lane of the warp must call it.
__device__ inline float WarpSum(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

// a . b over n floats: each lane folds d = lane, lane + 32, ... in order,
// then WarpSum.
__device__ inline float WarpDot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t d = Lane(); d < n; d += kWarpSize) s += a[d] * b[d];
  return WarpSum(s);
}

}  // namespace strata::train::kernels

#endif  // STRATA_TRAIN_COMPUTE_CUDA_CUDA_REDUCE_H_
