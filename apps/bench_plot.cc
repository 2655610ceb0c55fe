// bench_plot.cc: gnuplot charts of bench results.
//
// The script goes to gnuplot through an anonymous memfd (gnuplot reads
// /dev/fd/N), so nothing but the PNG touches the disk and no path needs shell
// quoting; the data travels inline as gnuplot datablocks.
#include "apps/bench_plot.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/byte_size.h"
#include "strata/status.h"

namespace strata {
namespace {

bool GnuplotOnPath() {
  const char* path = std::getenv("PATH");
  for (const absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    const std::string exe =
        absl::StrFormat("%s/gnuplot", dir.empty() ? "." : dir);
    if (access(exe.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// A gnuplot single-quoted string: '' stands for '.
std::string GnuplotQuote(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) {
    out += ch;
    if (ch == '\'') out += '\'';
  }
  return out + "'";
}

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
  return absl::StrFormat(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size 1200,560 font ',10' noenhanced\n"
      "} else {\n"
      "  set terminal png size 1200,560 noenhanced\n"
      "}\n"
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

// Runs gnuplot on `script`; Internal with its output when it fails.
absl::Status RunGnuplot(const std::string& script) {
  const int fd = memfd_create("strata-plot", 0);  // inherited by gnuplot
  if (fd < 0) return absl::ErrnoToStatus(errno, "memfd_create");
  if (write(fd, script.data(), script.size()) !=
      static_cast<ssize_t>(script.size())) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, "writing the gnuplot script");
  }
  const std::string cmd = absl::StrFormat("gnuplot /dev/fd/%d 2>&1", fd);
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  if (pipe != nullptr) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) {
      out.append(buf, n);
    }
  }
  const int rc = pipe != nullptr ? pclose(pipe) : -1;
  close(fd);
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("gnuplot failed (status %d): %s", rc, out));
}

// Opens `png` for appending (truncating nothing) to learn early whether it
// can be written; sets `*created` when the file did not exist.
absl::Status CheckPngWritable(const std::string& png, bool* created) {
  struct stat st;
  *created = stat(png.c_str(), &st) != 0;
  FILE* f = std::fopen(png.c_str(), "a");
  if (f == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot write the plot '%s'", png));
  }
  std::fclose(f);
  return absl::OkStatus();
}

}  // namespace

absl::Status PlotNvmeSweep(const NvmeSweepResult& r,
                           const std::string& png_path) {
  if (r.points.empty()) {
    return absl::InvalidArgumentError("NVMe sweep plot: no points to draw");
  }
  if (!GnuplotOnPath()) {
    return absl::UnavailableError(
        "gnuplot not found on PATH: install gnuplot (apt-get install "
        "gnuplot-nox)");
  }
  bool created = false;
  STRATA_RETURN_IF_ERROR(CheckPngWritable(png_path, &created));
  absl::Status status = RunGnuplot(Script(r, png_path));
  struct stat st;
  if (status.ok() && (stat(png_path.c_str(), &st) != 0 || st.st_size == 0)) {
    status = absl::InternalError(
        absl::StrFormat("gnuplot wrote nothing to '%s'", png_path));
  }
  if (!status.ok() && created) unlink(png_path.c_str());
  return status;
}

}  // namespace strata
