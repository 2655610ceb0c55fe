// gnuplot.h: draws PNG charts by running gnuplot (gnuplot-nox is enough) as
// a child process, for `bench --plot` and `train --plot`.
#ifndef STRATA_APPS_CLI_GNUPLOT_H_
#define STRATA_APPS_CLI_GNUPLOT_H_

#include <string>

#include "absl/status/status.h"

namespace strata {

// A gnuplot single-quoted string: '' stands for '.
std::string GnuplotQuote(const std::string& s);

// The terminal lines for a `width` x `height` PNG: pngcairo where gnuplot
// has it, else png.
std::string PngTerminal(int width, int height);

// OK when a plot could be drawn to `png_path`: gnuplot is on PATH and the
// path can be written (checked without leaving a file). Unavailable when
// gnuplot is missing ("install gnuplot (apt-get install gnuplot-nox)"); the
// errors of CheckWritable naming `flag` otherwise.
absl::Status CheckPlotOutput(const std::string& png_path,
                             const std::string& flag);

// Runs gnuplot on `script`, which writes `png_path`. Unavailable when
// gnuplot is not on PATH; an errno-based error naming the path when it
// cannot be written; Internal with gnuplot's message when gnuplot fails or
// writes nothing. On error no new file is left at `png_path`.
absl::Status DrawPng(const std::string& script, const std::string& png_path);

}  // namespace strata

#endif  // STRATA_APPS_CLI_GNUPLOT_H_
