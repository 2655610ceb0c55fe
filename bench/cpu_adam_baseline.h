// cpu_adam_baseline.h: the host Adam update as it was before issue 18 (built
// for the baseline ISA only, a std::thread started per call above 1 Mi
// elements), kept verbatim so cpu_adam_bench measures the speedup against it
// in the same run.
#ifndef STRATA_BENCH_CPU_ADAM_BASELINE_H_
#define STRATA_BENCH_CPU_ADAM_BASELINE_H_

#include <cstdint>

#include "train/compute/compute.h"

namespace strata::bench {

// The old AdamUpdateCpu: the same formula and bits as today's.
void OldAdamUpdateCpu(const train::AdamParams& p, float* w, float* m, float* v,
                      const float* g, int64_t n);

}  // namespace strata::bench

#endif  // STRATA_BENCH_CPU_ADAM_BASELINE_H_
