// bench_plot.h: draws bench results as PNG charts with gnuplot (run as a
// child process; gnuplot-nox is enough).
#ifndef STRATA_APPS_BENCH_BENCH_PLOT_H_
#define STRATA_APPS_BENCH_BENCH_PLOT_H_

#include <string>

#include "absl/status/status.h"
#include "apps/bench/nvme_sweep.h"

namespace strata {

// Writes a PNG to `png_path`: read and write GB/s (two panels) against block
// size on a log axis, one line per queue depth, the best point marked and,
// when it ran, fio at that point. Uses gnuplot's pngcairo terminal where
// present, else png. Errors: InvalidArgument for a result with no points;
// Unavailable when gnuplot is not on PATH ("install gnuplot (apt-get install
// gnuplot-nox)"); an errno-based error (NotFound, PermissionDenied, ...)
// naming the path when the PNG cannot be written; Internal with gnuplot's
// message when it fails. On error no new file is left at `png_path`.
absl::Status PlotNvmeSweep(const NvmeSweepResult& result,
                           const std::string& png_path);

}  // namespace strata

#endif  // STRATA_APPS_BENCH_BENCH_PLOT_H_
