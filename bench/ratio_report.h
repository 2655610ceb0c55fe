// ratio_report.h: store_roundtrip_bench's report: the usual console output,
// recorded run by run, and then the table that pairs each store case with its
// baseline (store GB/s, baseline GB/s, store/baseline), also as JSON rows.
#ifndef STRATA_BENCH_RATIO_REPORT_H_
#define STRATA_BENCH_RATIO_REPORT_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace strata {

// Console output as usual, plus each run's bytes/s by (name, size). Not
// thread-safe; Google Benchmark reports from one thread.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  explicit RecordingReporter(OutputOptions options)
      : ConsoleReporter(options) {}

  // Prints the runs, then records the bytes/s of each that did not fail; with
  // --benchmark_repetitions the median wins over single runs.
  void ReportRuns(const std::vector<Run>& runs) override;

  // Bytes per second, or a negative value when the case did not run.
  double Get(const std::string& name, uint64_t size) const;

 private:
  std::map<std::pair<std::string, uint64_t>, double> results_;
  std::set<std::pair<std::string, uint64_t>> medians_;
};

// Prints the ratio table for the store cases that ran at `sizes` (each store
// case next to its baseline at the size that baseline runs at; "-" where the
// baseline did not run) and returns its rows as a JSON array.
nlohmann::json PrintRatioTable(const RecordingReporter& reporter,
                               const std::vector<uint64_t>& sizes);

}  // namespace strata

#endif  // STRATA_BENCH_RATIO_REPORT_H_
