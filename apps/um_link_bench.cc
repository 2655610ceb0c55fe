// um_link_bench.cc: the link-um case's checks, and its answer in a build
// without CUDA (the measurement itself is in cuda_um_link_bench.cu).
#include "apps/um_link_bench.h"

namespace strata {

#ifndef STRATA_HAVE_CUDA
absl::StatusOr<UnifiedLinkBenchResult> RunUnifiedLinkBench(
    const UnifiedLinkBenchConfig& /*config*/) {
  return absl::FailedPreconditionError(
      "unified-memory link bench needs CUDA: strata was built without it");
}
#endif

}  // namespace strata
