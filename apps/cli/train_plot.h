// train_plot.h: `strata train --plot=FILE.png`: the training loss per step
// with the evaluations on it, and the bytes each link moved per step, drawn
// with gnuplot (apps/cli/gnuplot.h).
#ifndef STRATA_APPS_CLI_TRAIN_PLOT_H_
#define STRATA_APPS_CLI_TRAIN_PLOT_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "strata/stats.h"

namespace strata {

struct TrainPlotData {
  std::string title;           // the run, one line
  std::vector<double> losses;  // the training loss of every step
  std::string eval_name;       // "test loss", "validation loss"
  std::vector<std::pair<int64_t, double>> evals;  // (step, value)
  // Bytes moved on each link (strata::Link order) in every step.
  std::array<std::vector<uint64_t>, kNumLinks> link_bytes;
};

// Turns the store's cumulative link counters, read after each step, into
// bytes per step.
class LinkBytesPerStep {
 public:
  explicit LinkBytesPerStep(const Stats& start);
  void Record(const Stats& after_step);
  const std::array<std::vector<uint64_t>, kNumLinks>& bytes() const {
    return bytes_;
  }

 private:
  std::array<uint64_t, kNumLinks> last_;
  std::array<std::vector<uint64_t>, kNumLinks> bytes_;
};

// Writes a PNG to `png_path`: the loss per step (the evaluations as points)
// above, MiB per step on each link below. InvalidArgument when there are no
// steps; otherwise the errors of DrawPng.
absl::Status PlotTraining(const TrainPlotData& data,
                          const std::string& png_path);

}  // namespace strata

#endif  // STRATA_APPS_CLI_TRAIN_PLOT_H_
