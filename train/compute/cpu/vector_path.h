// vector_path.h: the vector units strata's host kernels are built for, and the
// one this CPU runs.
//
// One binary carries every path: each kernel is compiled once per path with a
// function target attribute (never -march=native), and the widest path the
// CPU and the OS support is chosen once, at first use. Every path gives the
// same bits (each kernel's comment says why), so the choice changes speed,
// never results. STRATA_VECTOR_PATH=baseline|avx2|avx512 narrows the choice
// (a path this CPU lacks is refused on stderr and the widest is used).
#ifndef STRATA_TRAIN_COMPUTE_CPU_VECTOR_PATH_H_
#define STRATA_TRAIN_COMPUTE_CPU_VECTOR_PATH_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace strata::train {

enum class VectorPath : uint8_t {
  kBaseline,  // what the build targets (x86-64: SSE2, 4 floats)
  kAvx2,      // 256-bit AVX2 (with F16C), 8 floats
  kAvx512,    // 512-bit AVX-512F, 16 floats
};

// Every path, narrowest first.
inline constexpr VectorPath kVectorPaths[] = {
    VectorPath::kBaseline, VectorPath::kAvx2, VectorPath::kAvx512};

// "baseline", "avx2" or "avx512".
const char* VectorPathName(VectorPath path);

// The path named `name` (as VectorPathName spells it); InvalidArgument
// listing the names otherwise.
absl::StatusOr<VectorPath> ParseVectorPath(std::string_view name);

// True when this CPU and OS run `path` (cpuid and the OS's saved register
// state, through __builtin_cpu_supports). kBaseline always.
bool VectorPathSupported(VectorPath path);

// The path host kernels run: the widest supported, or STRATA_VECTOR_PATH's
// if that one is supported. Decided on the first call; thread-safe.
VectorPath ChosenVectorPath();

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMPUTE_CPU_VECTOR_PATH_H_
