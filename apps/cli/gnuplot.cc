// gnuplot.cc: see gnuplot.h. The script goes to gnuplot through an anonymous
// memfd (gnuplot reads /dev/fd/N), so nothing but the PNG touches the disk
// and no path needs shell quoting; data travels inline as datablocks.
#include "apps/cli/gnuplot.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "apps/cli/output_path.h"
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

absl::Status GnuplotMissing() {
  return absl::UnavailableError(
      "gnuplot not found on PATH: install gnuplot (apt-get install "
      "gnuplot-nox)");
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

std::string GnuplotQuote(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) {
    out += ch;
    if (ch == '\'') out += '\'';
  }
  return out + "'";
}

std::string PngTerminal(int width, int height) {
  return absl::StrFormat(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
      "  set terminal pngcairo size %d,%d font ',10' noenhanced\n"
      "} else {\n"
      "  set terminal png size %d,%d noenhanced\n"
      "}\n",
      width, height, width, height);
}

absl::Status CheckPlotOutput(const std::string& png_path,
                             const std::string& flag) {
  if (png_path.empty()) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(CheckWritable(png_path, flag));
  return GnuplotOnPath() ? absl::OkStatus() : GnuplotMissing();
}

absl::Status DrawPng(const std::string& script, const std::string& png_path) {
  if (!GnuplotOnPath()) return GnuplotMissing();
  bool created = false;
  STRATA_RETURN_IF_ERROR(CheckPngWritable(png_path, &created));
  absl::Status status = RunGnuplot(script);
  struct stat st;
  if (status.ok() && (stat(png_path.c_str(), &st) != 0 || st.st_size == 0)) {
    status = absl::InternalError(
        absl::StrFormat("gnuplot wrote nothing to '%s'", png_path));
  }
  if (!status.ok() && created) unlink(png_path.c_str());
  return status;
}

}  // namespace strata
