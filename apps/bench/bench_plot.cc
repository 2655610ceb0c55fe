// bench_plot.cc: gnuplot charts of bench results (drawn by apps/cli/gnuplot.h).
#include "apps/bench/bench_plot.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/cli/gnuplot.h"
#include "base/byte_size.h"

namespace strata {
namespace {

// "4K", "1M": short tick labels.
std::string TickLabel(uint64_t bytes) {
  std::string s = FormatByteSize(bytes);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  const size_t i = s.find("iB");
  return i == std::string::npos ? s : s.substr(0, i);
}

// The terminal, output, layout and axes: a log x axis over the block sizes
// with a tick at each, a little room on both sides.
std::string Header(const NvmeSweepResult& r, const std::string& png) {
  std::string xtics;
  std::set<uint64_t> blocks;
  for (const NvmeSweepPoint& p : r.points) blocks.insert(p.block_bytes);
  for (const uint64_t b : blocks) {
    absl::StrAppendFormat(&xtics, "%s\"%s\" %d", xtics.empty() ? "" : ", ",
                          TickLabel(b), b);
  }
  return PngTerminal(1200, 560) +
         absl::StrFormat(
             "set output %s\n"
             "set multiplot layout 1,2 title 'strata NVMe sweep: %s, O_DIRECT, "
             "median GB/s (1e9 B/s)'\n"
             "set logscale x 2\nset xrange [%g:%g]\nset xtics (%s)\n"
             "set xlabel 'block size'\nset ylabel 'GB/s'\nset yrange [0:*]\n"
             "set grid\nset key outside right top vertical\n",
             GnuplotQuote(png), r.engine, *blocks.begin() / 1.5,
             *blocks.rbegin() * 1.5, xtics);
}

// One datablock per queue depth ($qdN: block read write) and $best, $fio.
std::string DataBlocks(const NvmeSweepResult& r) {
  std::map<uint32_t, std::string> rows;
  for (const NvmeSweepPoint& p : r.points) {
    absl::StrAppendFormat(&rows[p.queue_depth], "%d %.6f %.6f\n", p.block_bytes,
                          p.read_gbps, p.write_gbps);
  }
  std::string out;
  for (const auto& [depth, text] : rows) {
    absl::StrAppendFormat(&out, "$qd%d << EOD\n%sEOD\n", depth, text);
  }
  absl::StrAppendFormat(&out, "$best << EOD\n%d %.6f %.6f\nEOD\n",
                        r.best.block_bytes, r.best.read_gbps,
                        r.best.write_gbps);
  if (r.fio_read_gbps && r.fio_write_gbps) {
    absl::StrAppendFormat(&out, "$fio << EOD\n%d %.6f %.6f\nEOD\n",
                          r.best.block_bytes, *r.fio_read_gbps,
                          *r.fio_write_gbps);
  }
  return out;
}

// The plot command of one panel; `column` 2 is read, 3 is write.
std::string Panel(const NvmeSweepResult& r, const char* title, int column) {
  std::set<uint32_t> depths;
  for (const NvmeSweepPoint& p : r.points) depths.insert(p.queue_depth);
  std::string plot = absl::StrFormat("set title '%s'\nplot ", title);
  for (const uint32_t d : depths) {
    absl::StrAppendFormat(&plot,
                          "$qd%d using 1:%d with linespoints title 'QD %d', ",
                          d, column, d);
  }
  absl::StrAppendFormat(
      &plot, "$best using 1:%d with points pt 6 ps 3 lc 'black' title 'best'",
      column);
  if (r.fio_read_gbps && r.fio_write_gbps) {
    absl::StrAppendFormat(
        &plot, ", $fio using 1:%d with points pt 9 ps 2 lc 'red' title 'fio'",
        column);
  }
  return plot + "\n";
}

std::string Script(const NvmeSweepResult& r, const std::string& png) {
  return Header(r, png) + DataBlocks(r) + Panel(r, "read", 2) +
         Panel(r, "write", 3) + "unset multiplot\nset output\n";
}

}  // namespace

absl::Status PlotNvmeSweep(const NvmeSweepResult& r,
                           const std::string& png_path) {
  if (r.points.empty()) {
    return absl::InvalidArgumentError("NVMe sweep plot: no points to draw");
  }
  return DrawPng(Script(r, png_path), png_path);
}

}  // namespace strata
