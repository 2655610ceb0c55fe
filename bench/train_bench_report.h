// train_bench_report.h: train_bench's results per mode (resident,
// scheduler, on demand) and their report: the table, the NVMe bytes against
// the floor the budgets force, and the JSON rows.
#ifndef STRATA_BENCH_TRAIN_BENCH_REPORT_H_
#define STRATA_BENCH_TRAIN_BENCH_REPORT_H_

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/stats.h"

namespace strata::train {

struct ModeResult {
  std::string name;
  double step_ms = 0;        // median of the timed steps
  double train_seconds = 0;  // every step, warm-up included
  std::vector<double> losses;
  Stats stats;
  double hit_rate = 1;
  // CPU seconds (user + system, every thread of the process) per timed
  // step: compute, copies, checksums and I/O completions together.
  double cpu_seconds_per_step = 0;
  // Each link's bytes and transfers over the timed steps (the warm-up's,
  // while the scheduler learns the step, left out).
  std::array<LinkStats, kNumLinks> timed_links{};
  int64_t timed_steps = 0;
  // The GPT, warm-up included (0 for the MLP): steps whose speculative
  // AdamW update was rolled back and run again clipped, and steps updated
  // only at the step's end, once the norm was known (ClipStats).
  int64_t rolled_back_steps = 0;
  int64_t deferred_steps = 0;
};

// The NVMe tier's sequential bandwidth, 1e9 bytes/s; 0 when not measured.
struct LinkRates {
  double nvme_read_gbps = 0;
  double nvme_write_gbps = 0;
};

// Seconds one step's NVMe bytes need at `rates`: reads and writes share the
// disk, so their times add.
double IoBoundSeconds(double read_bytes, double write_bytes,
                      const LinkRates& rates);

// Prints one row per mode (step time and its ratio to the first mode's,
// bytes per step per link, hit rate, stall fraction, the I/O and CPU bounds)
// and each mode's NVMe reads against the floor; returns the rows as JSON.
nlohmann::json PrintModes(const std::vector<ModeResult>& results,
                          const LinkRates& rates);

// A line per planned mode setting its plan's figures beside the measured.
void PrintPlans(const std::vector<ModeResult>& results);

}  // namespace strata::train

#endif  // STRATA_BENCH_TRAIN_BENCH_REPORT_H_
