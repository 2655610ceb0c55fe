// scheduler_bench.h: the scheduler's synthetic layered workload, run by
// `strata bench -t scheduler`.
//
// N layers, each one weight tensor homed in pinned host memory; a step runs
// forward over the layers then backward in reverse, acquiring each on the
// device for a fixed CPU busy time ("compute"). The model is several times
// the device budget and the simulated device's link model makes a layer's
// transfer take about as long as its compute, so a step can only approach
// max(compute, transfer) if the transfers overlap the compute. The same steps
// run with the scheduler (prefetch + Belady), on demand (no prefetch) and with
// LRU eviction; a fourth run skips one random layer per step.
// RunUnifiedBench runs the same steps three ways: explicit copies (the
// scheduler above), unified memory with prefetch hints, and unified memory
// without hints, where every layer not resident is faulted in on its acquire.
#ifndef STRATA_APPS_BENCH_SCHEDULER_BENCH_H_
#define STRATA_APPS_BENCH_SCHEDULER_BENCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace strata {

struct SchedulerBenchConfig {
  int layers = 16;
  uint64_t layer_bytes = 4 << 20;
  uint64_t device_budget_bytes = 16 << 20;  // model = 4x the device budget
  double link_gbps = 2.0;                   // 4 MiB in ~2.1 ms
  double compute_seconds_per_layer = 0.002;
  int steps = 8;  // the first records the trace and is not timed
  uint64_t seed = 1;
  // If set, the scheduler run's timeline (Chrome trace JSON) goes here.
  std::string timeline_path;
};

struct SchedulerBenchResult {
  double step_seconds = 0;            // median step, scheduler
  double step_seconds_on_demand = 0;  // median step, prefetch off
  double step_seconds_lru = 0;        // median step, prefetch + LRU eviction
  double compute_seconds = 0;         // busy time of one step
  double transfer_seconds = 0;        // H2D bytes of a scheduler step / link
  double hit_rate = 0;          // acquires that found their data (steps 2+)
  double hit_rate_dynamic = 0;  // same, one random layer skipped per step
  uint64_t rerecords_dynamic = 0;
  uint64_t model_bytes = 0;
};

// Runs the four variants. Errors from the store are returned as they are.
absl::StatusOr<SchedulerBenchResult> RunSchedulerBench(
    const SchedulerBenchConfig& config);

// One way of making device residency, measured over steps 2+.
struct ResidencyRun {
  double step_seconds = 0;        // median step
  double hit_rate = 0;            // acquires that found their layer there
  double h2d_bytes_per_step = 0;  // bytes moved toward the device
  double d2h_bytes_per_step = 0;  // bytes moved back (evictions)
  double faults_per_step = 0;     // unified: acquires served on demand
};

struct UnifiedBenchResult {
  ResidencyRun copies;          // explicit copies (cudaMemcpyAsync)
  ResidencyRun unified_hints;   // unified memory, prefetch hints
  ResidencyRun unified_faults;  // unified memory, no hints
  double compute_seconds = 0;   // busy time of one step
  double bound_seconds = 0;     // max(compute, copies' H2D bytes / link)
};

// Runs the three variants. Errors from the store are returned as they are.
absl::StatusOr<UnifiedBenchResult> RunUnifiedBench(
    const SchedulerBenchConfig& config);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_SCHEDULER_BENCH_H_
