// cpu_adam_ceilings.h: what bounds the host Adam update on this machine, for
// cpu_adam_bench: streaming kernels (the memory-bandwidth bound), the rate of
// the divider that runs each element's sqrt and divide (the compute bound),
// and the cache sizes that say which of the two applies at a size.
#ifndef STRATA_BENCH_CPU_ADAM_CEILINGS_H_
#define STRATA_BENCH_CPU_ADAM_CEILINGS_H_

#include <cstdint>

#include "train/compute/cpu/vector_path.h"

namespace strata::bench {

// c = a + s * b (STREAM's triad) on n floats: 12 bytes per element.
void StreamTriad(float* c, const float* a, const float* b, int64_t n);

// The update's own traffic with trivial arithmetic: reads w, m, v, g and
// writes w, m, v in place, 28 bytes per element. Keeps v >= 0, so updates
// run on the same arrays afterwards stay finite.
void StreamPattern(float* w, float* m, float* v, const float* g, int64_t n);

// Elements per second of one square root and one divide per element on the
// calling thread with `path`'s vector width (eight independent chains of
// each; median of `samples`, each at least `min_sample_seconds`). 0 where
// not x86. `path` must be supported here.
double DividerElementsPerSecond(train::VectorPath path,
                                double min_sample_seconds, int samples);

// Cache sizes in bytes as the OS reports them to this process (sysfs, which
// a VM fills with what the guest sees; else sysconf); 0 if unknown.
double L2BytesPerCore();
double LlcBytes();

}  // namespace strata::bench

#endif  // STRATA_BENCH_CPU_ADAM_CEILINGS_H_
