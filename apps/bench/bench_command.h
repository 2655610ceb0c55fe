// bench_command.h: `strata bench` — named benchmark cases, each saying
// whether it applies here and why not, run by name or prefix, printed as a
// table with a progress line while they run, and optionally written as JSON,
// as a machine profile (link GB/s, best NVMe setting) StoreOptions can load,
// and as a plot.
#ifndef STRATA_APPS_BENCH_BENCH_COMMAND_H_
#define STRATA_APPS_BENCH_BENCH_COMMAND_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/options.h"

namespace strata {

struct BenchRequest {
  std::string selector;       // case name or prefix; empty runs every case
  bool list = false;          // list the cases (and whether they apply) instead
  std::string json_path;      // every number measured, as JSON
  std::string timeline_path;  // the scheduler case's Chrome trace
  std::string profile_path;   // the machine profile (strata/profile.h)
  std::string plot_path;      // PNG of the NVMe sweep (gnuplot)
  // Device backend and link model, first NVMe directory, block size and
  // queue depth (from the shared flags).
  StoreOptions store;
  uint64_t nvme_bytes = 256 << 20;  // bytes per NVMe pass (--bench-size)
  bool quick = false;               // tiny sizes and few samples: a smoke test
  bool size_given = false;          // --bench-size given: it wins over quick's

  // The bytes a case moves: --bench-size, or `quick_bytes` under --quick
  // when no --bench-size was given.
  uint64_t BenchBytes(uint64_t quick_bytes) const {
    return quick && !size_given ? quick_bytes : nvme_bytes;
  }
  // The run's flags (EffectiveConfig), written to the JSON as "config".
  nlohmann::json config;
};

// Runs the request; returns the process exit code: 0, 1 when a case failed,
// 2 for bad input (an unknown case, an unwritable output path).
int RunBench(const BenchRequest& request);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_BENCH_COMMAND_H_
