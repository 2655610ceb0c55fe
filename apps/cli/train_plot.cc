// train_plot.cc: see train_plot.h.
#include "apps/cli/train_plot.h"

#include "absl/strings/str_format.h"
#include "apps/cli/gnuplot.h"

namespace strata {

LinkBytesPerStep::LinkBytesPerStep(const Stats& start) {
  for (int l = 0; l < kNumLinks; ++l) last_[l] = start.links[l].bytes;
}

void LinkBytesPerStep::Record(const Stats& after_step) {
  for (int l = 0; l < kNumLinks; ++l) {
    const uint64_t now = after_step.links[l].bytes;
    bytes_[l].push_back(now - last_[l]);
    last_[l] = now;
  }
}

namespace {

// $loss (step loss), $eval (step value), $links (step, MiB per link).
std::string DataBlocks(const TrainPlotData& d) {
  std::string out = "$loss << EOD\n";
  for (size_t i = 0; i < d.losses.size(); ++i) {
    absl::StrAppendFormat(&out, "%d %.9g\n", i + 1, d.losses[i]);
  }
  out += "EOD\n$eval << EOD\n";
  for (const auto& [step, value] : d.evals) {
    absl::StrAppendFormat(&out, "%d %.9g\n", step, value);
  }
  out += "EOD\n$links << EOD\n";
  for (size_t i = 0; i < d.losses.size(); ++i) {
    absl::StrAppendFormat(&out, "%d", i + 1);
    for (const std::vector<uint64_t>& link : d.link_bytes) {
      absl::StrAppendFormat(&out, " %.6f",
                            i < link.size() ? link[i] / 1048576.0 : 0.0);
    }
    out += "\n";
  }
  return out + "EOD\n";
}

std::string Script(const TrainPlotData& d, const std::string& png) {
  std::string s = PngTerminal(1000, 800) +
                  absl::StrFormat("set output %s\n", GnuplotQuote(png)) +
                  DataBlocks(d) +
                  absl::StrFormat(
                      "set multiplot layout 2,1 title %s\n"
                      "set grid\nset key outside right top vertical\n"
                      "set xrange [0.5:%g]\nset xlabel 'step'\n",
                      GnuplotQuote(d.title), d.losses.size() + 0.5);
  s += "set title 'loss'\nset ylabel 'loss'\nplot $loss using 1:2 with "
       "lines lw 2 title 'training loss'";
  if (!d.evals.empty()) {
    absl::StrAppendFormat(
        &s, ", $eval using 1:2 with linespoints pt 7 ps 1.5 title %s",
        GnuplotQuote(d.eval_name));
  }
  s += "\nset title 'bytes moved per step'\nset ylabel 'MiB'\n"
       "set yrange [0:*]\nplot ";
  for (int l = 0; l < kNumLinks; ++l) {
    absl::StrAppendFormat(&s, "%s$links using 1:%d with lines lw 2 title '%s'",
                          l == 0 ? "" : ", ", l + 2,
                          LinkName(static_cast<Link>(l)));
  }
  return s + "\nunset multiplot\nset output\n";
}

}  // namespace

absl::Status PlotTraining(const TrainPlotData& data,
                          const std::string& png_path) {
  if (data.losses.empty()) {
    return absl::InvalidArgumentError("training plot: no steps to draw");
  }
  return DrawPng(Script(data, png_path), png_path);
}

}  // namespace strata
