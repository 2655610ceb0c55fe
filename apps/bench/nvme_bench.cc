// nvme_bench.cc: the `nvme` bench case and the NVMe measurement, directory
// check and fio run the other NVMe benches share.
//
// A measurement opens its own NvmeTier (an O_TMPFILE swap file, gone when the
// tier closes), so the only named file any NVMe bench creates is fio's, which
// RunFio removes as soon as fio exits, on every path.
#include "apps/bench/nvme_bench.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "base/bench_pattern.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "tiers/host/host_arena.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {
namespace {

// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

// fio reads ':' in --filename as a separator between files.
std::string FioEscape(const std::string& path) {
  std::string out;
  for (const char ch : path) {
    if (ch == ':') out += '\\';
    out += ch;
  }
  return out;
}

// fio's file and process, for the interrupt handler: fio cannot use an
// unnamed O_TMPFILE file like the store's, so an interrupted run must kill
// fio and remove its file itself. One fio at a time.
char g_fio_file[4096];
volatile pid_t g_fio_pid = 0;

void RemoveFioFileAndDie(int sig) {  // async-signal-safe calls only
  if (g_fio_pid > 0) {
    kill(g_fio_pid, SIGKILL);
    waitpid(g_fio_pid, nullptr, 0);
  }
  if (g_fio_file[0] != '\0') unlink(g_fio_file);
  signal(sig, SIG_DFL);
  raise(sig);
}

// Runs `cmd` with /bin/sh, its stdout into `out`; returns the wait status,
// or -1 when it cannot start. The child's pid is in g_fio_pid meanwhile.
int RunCommand(const std::string& cmd, std::string* out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  g_fio_pid = pid;
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_fio_pid = 0;
  return status;
}

// Runs fio once on `file` and returns its bandwidth in GB/s, or why not.
absl::StatusOr<double> RunFioOnce(const std::string& file, uint64_t bytes,
                                  uint64_t block_bytes, uint32_t queue_depth,
                                  int loops, const char* rw) {
  // `exec` makes the shell become fio, so the pid RunCommand records is
  // fio's own (the interrupt handler kills it before removing its file).
  const std::string cmd = absl::StrFormat(
      "exec fio --name=strata --filename=%s --size=%d --bs=%d --iodepth=%d "
      "--ioengine=io_uring --fixedbufs=1 --registerfiles=1 --direct=1 --rw=%s "
      "--loops=%d --output-format=json 2>/dev/null",
      ShellQuote(FioEscape(file)), bytes, block_bytes, queue_depth, rw, loops);
  std::string out;
  const int rc = RunCommand(cmd, &out);
  if (rc < 0) return absl::UnavailableError("cannot start fio");
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
    return absl::UnavailableError("fio is not installed (apt-get install fio)");
  }
  if (rc != 0) {
    return absl::UnavailableError(absl::StrFormat(
        "fio --rw=%s failed (exit status %d; run it by hand with the same "
        "--size=%d --bs=%d to see why)",
        rw, WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, bytes, block_bytes));
  }
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return absl::UnavailableError("fio printed no JSON report");
  }
  return j["jobs"][0][rw]["bw_bytes"].get<double>() / 1e9;
}

}  // namespace

absl::Status CheckBenchDirectory(const std::string& dir, uint64_t bytes_needed,
                                 std::string_view size_flag) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrFormat(
          "bench directory '%s' does not exist: create it or pass another "
          "--nvme-dir",
          dir));
    }
    return absl::ErrnoToStatus(errno, absl::StrFormat("stat '%s'", dir));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "bench directory '%s' is not a directory: pass one with --nvme-dir",
        dir));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "bench directory '%s' is not writable by this user (%s): fix its "
        "permissions or pass another --nvme-dir",
        dir, std::strerror(errno)));
  }
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("statvfs '%s'", dir));
  }
  const uint64_t free_bytes =
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t want = bytes_needed > UINT64_MAX - kBenchDiskMarginBytes
                            ? UINT64_MAX
                            : bytes_needed + kBenchDiskMarginBytes;
  if (free_bytes >= want) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "bench directory '%s' has %s free; the bench needs %s plus a %s "
      "margin: lower %s, free space or pass another --nvme-dir",
      dir, FormatByteSize(free_bytes), FormatByteSize(bytes_needed),
      FormatByteSize(kBenchDiskMarginBytes), size_flag));
}

namespace {

// Installs the handler for SIGINT/SIGTERM/SIGHUP while fio's file exists.
class FioFileGuard {
 public:
  explicit FioFileGuard(const std::string& path) {
    std::snprintf(g_fio_file, sizeof g_fio_file, "%s", path.c_str());
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      old_[n_++] = {sig, signal(sig, RemoveFioFileAndDie)};
    }
  }
  ~FioFileGuard() {
    for (int i = 0; i < n_; ++i) signal(old_[i].first, old_[i].second);
    unlink(g_fio_file);
    g_fio_file[0] = '\0';
  }

 private:
  std::pair<int, sighandler_t> old_[3];
  int n_ = 0;
};

}  // namespace

FioRates RunFio(const std::string& directory, uint64_t bytes,
                uint64_t block_bytes, uint32_t queue_depth, int loops) {
  FioRates r;
  std::string file = directory + "/.strata-bench-fio-XXXXXX";
  const int fd = mkstemp(file.data());  // a private name fio then fills
  if (fd < 0) {
    r.note = absl::StrFormat("cannot create fio's file in '%s': %s", directory,
                             std::strerror(errno));
    return r;
  }
  close(fd);
  const FioFileGuard guard(file);  // removed on return or on Ctrl-C
  absl::StatusOr<double> write =
      RunFioOnce(file, bytes, block_bytes, queue_depth, loops, "write");
  absl::StatusOr<double> read =
      write.ok()
          ? RunFioOnce(file, bytes, block_bytes, queue_depth, loops, "read")
          : write.status();
  if (write.ok() && read.ok()) {
    r.write_gbps = *write;
    r.read_gbps = *read;
  } else {
    r.note = std::string((write.ok() ? read : write).status().message());
  }
  return r;
}

absl::StatusOr<NvmeMeasurement> MeasureStoreNvme(const NvmeBenchConfig& c) {
  STRATA_RETURN_IF_ERROR(CheckBenchDirectory(c.directory, c.size_bytes));
  NvmeMeasureConfig m;
  m.nvme.directories = {c.directory};
  m.nvme.block_size_bytes = c.block_bytes;
  m.nvme.queue_depth = c.queue_depth;
  m.nvme.engine = c.engine;
  m.bytes = c.size_bytes;
  m.samples = c.samples;
  return MeasureNvme(m);
}

absl::StatusOr<NvmeBenchResult> RunNvmeBench(const NvmeBenchConfig& c) {
  STRATA_ASSIGN_OR_RETURN(const NvmeMeasurement measured, MeasureStoreNvme(c));
  NvmeBenchResult r;
  r.read_gbps = measured.read_gbps;
  r.write_gbps = measured.write_gbps;
  r.engine = measured.engine;
  FioRates fio = RunFio(c.directory, c.size_bytes, c.block_bytes, c.queue_depth,
                        c.samples + 1);
  r.fio_read_gbps = fio.read_gbps;
  r.fio_write_gbps = fio.write_gbps;
  r.fio_note = fio.note;
  return r;
}

// The `nvme` case of `strata bench` (bench_case.h): its configuration from
// the request, its table and its JSON; and the check all NVMe cases share.

namespace {

void PrintFioRow(const char* op, double ours, std::optional<double> fio) {
  if (fio) {
    absl::PrintF("  %-8s %12.2f %12.2f %8.3f\n", op, ours, *fio, ours / *fio);
  } else {
    absl::PrintF("  %-8s %12.2f %12s %8s\n", op, ours, "-", "-");
  }
}

absl::Status RunNvmeCase(BenchContext& ctx, nlohmann::json& json) {
  NvmeBenchConfig config;
  config.directory = ctx.request.store.nvme.directories.front();
  config.block_bytes = ctx.request.store.nvme.block_size_bytes;
  config.queue_depth = ctx.request.store.nvme.queue_depth;
  config.size_bytes = ctx.request.BenchBytes(kNvmeQuickBytes);
  absl::PrintF(
      "nvme: sequential %s in %s, block %s, queue depth %d, O_DIRECT (the "
      "page cache cannot flatter it), median of %d, bytes verified\n",
      FormatByteSize(config.size_bytes), config.directory,
      FormatByteSize(config.block_bytes), config.queue_depth, config.samples);
  std::fflush(stdout);
  ctx.Progress("nvme", "read, write, then fio");
  absl::StatusOr<NvmeBenchResult> r = RunNvmeBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF("  %-8s %12s %12s %8s\n", "op", "strata GB/s", "fio GB/s",
               "ratio");
  PrintFioRow("read", r->read_gbps, r->fio_read_gbps);
  PrintFioRow("write", r->write_gbps, r->fio_write_gbps);
  if (!r->fio_note.empty()) absl::PrintF("  fio: %s\n", r->fio_note);
  json = {{"read_gbps", r->read_gbps},
          {"write_gbps", r->write_gbps},
          {"engine", r->engine},
          {"directory", config.directory},
          {"size_bytes", config.size_bytes},
          {"block_size_bytes", config.block_bytes},
          {"queue_depth", config.queue_depth}};
  if (r->fio_read_gbps) {
    json["fio_read_gbps"] = *r->fio_read_gbps;
    json["fio_write_gbps"] = *r->fio_write_gbps;
  }
  return absl::OkStatus();
}

}  // namespace

std::string NeedsNvmeDir(const BenchRequest& r) {
  return r.store.nvme.directories.empty()
             ? "no NVMe directory (--nvme-dir is empty)"
             : "";
}

BenchCase NvmeCase() {
  return {"nvme",
          "sequential reads and writes through the store's own NVMe path at "
          "--block-size and --queue-depth, next to fio with the same settings",
          NeedsNvmeDir, RunNvmeCase};
}

}  // namespace strata
