// vector_path.cc: which vector path this CPU runs (see vector_path.h).
#include "train/compute/cpu/vector_path.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"

namespace strata::train {
namespace {

VectorPath WidestSupported() {
  VectorPath widest = VectorPath::kBaseline;
  for (VectorPath path : kVectorPaths) {
    if (VectorPathSupported(path)) widest = path;
  }
  return widest;
}

VectorPath Choose() {
  const VectorPath widest = WidestSupported();
  const char* env = std::getenv("STRATA_VECTOR_PATH");
  if (env == nullptr || *env == '\0') return widest;
  absl::StatusOr<VectorPath> asked = ParseVectorPath(env);
  if (!asked.ok()) {
    std::fprintf(stderr, "strata: STRATA_VECTOR_PATH: %s; using %s\n",
                 std::string(asked.status().message()).c_str(),
                 VectorPathName(widest));
    return widest;
  }
  if (!VectorPathSupported(*asked)) {
    std::fprintf(stderr,
                 "strata: STRATA_VECTOR_PATH=%s: this CPU does not run it; "
                 "using %s\n",
                 env, VectorPathName(widest));
    return widest;
  }
  return *asked;
}

}  // namespace

const char* VectorPathName(VectorPath path) {
  switch (path) {
    case VectorPath::kBaseline:
      return "baseline";
    case VectorPath::kAvx2:
      return "avx2";
    case VectorPath::kAvx512:
      return "avx512";
  }
  return "?";
}

absl::StatusOr<VectorPath> ParseVectorPath(std::string_view name) {
  for (VectorPath path : kVectorPaths) {
    if (name == VectorPathName(path)) return path;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown vector path '%s' (baseline, avx2 or avx512)", name));
}

#if defined(__x86_64__)
namespace {
// cpuid leaf 1's F16C bit, read directly: clang's __builtin_cpu_supports does
// not know "f16c" (GCC's does), and the thread-safety build is clang's.
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
}  // namespace
#endif

bool VectorPathSupported(VectorPath path) {
  switch (path) {
    case VectorPath::kBaseline:
      return true;
#if defined(__x86_64__)
    case VectorPath::kAvx2:
      // F16C converts fp16 on this path (half_cast.h); every AVX2 CPU
      // has it, but it is its own cpuid bit.
      return __builtin_cpu_supports("avx2") && CpuHasF16c();
    case VectorPath::kAvx512:
      return __builtin_cpu_supports("avx512f");
#else
    default:
      return false;
#endif
  }
  return false;
}

VectorPath ChosenVectorPath() {
  static const VectorPath chosen = Choose();
  return chosen;
}

}  // namespace strata::train
