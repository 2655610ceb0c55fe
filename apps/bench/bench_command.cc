// bench_command.cc: the `strata bench` command (see bench_command.h): checks
// the request, selects the cases (bench_case.h; each is defined beside its
// measurement), runs them with a progress line, and writes the outputs.
#include "apps/bench/bench_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "apps/bench/bench_plot.h"
#include "apps/bench/nvme_bench.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/output_path.h"
#include "base/byte_size.h"
#include "strata/profile.h"
#include "strata/status.h"
#include "tiers/nvme/request_shape.h"

namespace strata {

void BenchContext::Progress(const char* name, const std::string& what) const {
  if (!tty) return;
  std::fprintf(stderr, "\r[%d/%d] %s: %s\x1b[K", index, count, name,
               what.c_str());
  std::fflush(stderr);
}

void BenchContext::ClearProgress() const {
  if (tty) std::fputs("\r\x1b[K", stderr);
}

namespace {

const std::vector<BenchCase>& Cases() {
  static const std::vector<BenchCase> cases = {
      LinkCase(),      LinkUmCase(),    NvmeCase(),    NvmeDeviceCase(),
      NvmeSweepCase(), SchedulerCase(), UnifiedCase(),
  };
  return cases;
}

// A case is selected by its exact name, or else by a prefix of names ("nvme"
// alone runs nvme only; "nvme-" runs nvme-device and nvme-sweep).
bool Selected(const std::string& name, const std::string& selector) {
  for (const BenchCase& c : Cases()) {
    if (selector == c.name) return name == selector;
  }
  return name.rfind(selector, 0) == 0;
}

int List(const BenchRequest& request) {
  for (const BenchCase& c : Cases()) {
    const std::string why = c.why_not(request);
    absl::PrintF("%-12s %s%s\n", c.name, c.description,
                 why.empty() ? "" : absl::StrFormat(" [not here: %s]", why));
  }
  return 0;
}

absl::Status CheckOutputs(const BenchRequest& r) {
  const std::pair<std::string, const char*> outputs[] = {
      {r.json_path, "--json"},
      {r.timeline_path, "--timeline"},
      {r.profile_path, "--profile"},
      {r.plot_path, "--plot"}};
  std::vector<FileFlag> files;
  for (const auto& [path, flag] : outputs) {
    if (absl::Status s = CheckWritable(path, flag); !s.ok()) return s;
    files.push_back({path, flag});
  }
  STRATA_RETURN_IF_ERROR(CheckDistinctFiles(files));
  if (!r.plot_path.empty() &&
      std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return absl::UnavailableError(
        "--plot needs gnuplot, which is not installed (apt-get install "
        "gnuplot-nox)");
  }
  return absl::OkStatus();
}

// The NVMe settings the cases will use, checked as the store checks them.
absl::Status CheckNvmeSettings(const BenchRequest& r) {
  const uint64_t block = r.store.nvme.block_size_bytes;
  STRATA_RETURN_IF_ERROR(CheckNvmeRequestShape(
      block, r.store.nvme.queue_depth, "--block-size", "--queue-depth"));
  if ((!r.quick || r.size_given) &&
      (r.nvme_bytes < block || r.nvme_bytes % block != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--bench-size=%s: must be a whole number of --block-size=%s requests "
        "(at least one)",
        FormatByteSize(r.nvme_bytes), FormatByteSize(block)));
  }
  // A directory that is not there is bad input, refused before any case
  // prints its header.
  for (const std::string& dir : r.store.nvme.directories) {
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      return absl::NotFoundError(absl::StrFormat(
          "--nvme-dir=%s: no such directory; pass an existing one", dir));
    }
  }
  // The nvme case's passes need their --bench-size free: short space is
  // bad input too, refused before any case runs or any file is written.
  if (Selected("nvme", r.selector) && NeedsNvmeDir(r).empty()) {
    STRATA_RETURN_IF_ERROR(CheckBenchDirectory(r.store.nvme.directories.front(),
                                               r.BenchBytes(kNvmeQuickBytes)));
  }
  return absl::OkStatus();
}

// Writes what the run produced besides the table: JSON, profile.
int WriteOutputs(const BenchContext& ctx, const nlohmann::json& report) {
  const BenchRequest& r = ctx.request;
  if (!r.json_path.empty()) {
    std::ofstream out(r.json_path);
    out << report.dump(2) << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "strata bench: cannot write --json=%s\n",
                   r.json_path.c_str());
      return 1;
    }
  }
  if (!r.plot_path.empty()) {
    if (!ctx.sweep) {
      std::fprintf(stderr,
                   "strata bench: --plot draws the nvme-sweep case, which did "
                   "not run (select it with -t nvme-sweep)\n");
      return 1;
    }
    if (absl::Status s = PlotNvmeSweep(*ctx.sweep, r.plot_path); !s.ok()) {
      std::fprintf(stderr, "strata bench: --plot: %s\n", ErrorText(s).c_str());
      return 1;
    }
    absl::PrintF("plot written to %s\n", r.plot_path);
  }
  if (!r.profile_path.empty()) {
    if (!ctx.profiled) {
      std::fprintf(stderr,
                   "strata bench: --profile: no case that measures the "
                   "machine profile ran (link, nvme-sweep)\n");
      return 1;
    }
    if (absl::Status s = SaveMachineProfile(ctx.profile, r.profile_path);
        !s.ok()) {
      std::fprintf(stderr, "strata bench: %s\n", ErrorText(s).c_str());
      return 1;
    }
    absl::PrintF("profile written to %s (load it with --machine-profile)\n",
                 r.profile_path);
  }
  return 0;
}

// The selection checks: some case is selected, and so is each case an
// output needs. Prints why not and returns false.
bool CheckSelection(const BenchRequest& request, int count) {
  if (count == 0) {
    std::fprintf(stderr,
                 "strata bench: no case named '%s'; `strata bench --list` "
                 "lists them\n",
                 request.selector.c_str());
    return false;
  }
  if (!request.plot_path.empty() && !Selected("nvme-sweep", request.selector)) {
    std::fprintf(stderr,
                 "strata bench: --plot draws the nvme-sweep case, which '-t "
                 "%s' does not select\n",
                 request.selector.c_str());
    return false;
  }
  if (!request.profile_path.empty() && !Selected("link", request.selector) &&
      !Selected("nvme-sweep", request.selector)) {
    std::fprintf(stderr,
                 "strata bench: --profile needs the link or nvme-sweep case, "
                 "which '-t %s' does not select\n",
                 request.selector.c_str());
    return false;
  }
  return true;
}

// Runs the selected cases in order, each one's JSON (or why it did not run,
// or its error) under its name in `report`; false when a case failed.
bool RunCases(BenchContext& ctx, nlohmann::json& report) {
  bool ok = true;
  for (const BenchCase& c : Cases()) {
    if (!Selected(c.name, ctx.request.selector)) continue;
    ++ctx.index;
    if (const std::string why = c.why_not(ctx.request); !why.empty()) {
      absl::PrintF("%s: not run here: %s\n", c.name, why);
      report[c.name] = {{"applies", false}, {"why_not", why}};
      continue;
    }
    if (!ctx.tty) {
      std::fprintf(stderr, "[%d/%d] %s ...\n", ctx.index, ctx.count, c.name);
    }
    nlohmann::json result;
    if (absl::Status s = c.run(ctx, result); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, ErrorText(s).c_str());
      report[c.name] = {{"applies", true}, {"error", s.ToString()}};
      ok = false;
      continue;
    }
    result["applies"] = true;
    report[c.name] = result;
  }
  return ok;
}

}  // namespace

int RunBench(const BenchRequest& request) {
  if (request.list) return List(request);
  absl::Status checked = CheckOutputs(request);
  if (checked.ok()) checked = CheckNvmeSettings(request);
  if (absl::Status s = checked; !s.ok()) {
    std::fprintf(stderr, "strata bench: %s\n", ErrorText(s).c_str());
    return 2;
  }
  BenchContext ctx{.request = request, .tty = isatty(STDERR_FILENO) == 1};
  for (const BenchCase& c : Cases()) {
    ctx.count += Selected(c.name, request.selector);
  }
  if (!CheckSelection(request, ctx.count)) return 2;
  nlohmann::json report = nlohmann::json::object();
  if (!request.config.is_null()) report["config"] = request.config;
  const bool ok = RunCases(ctx, report);
  const int written = WriteOutputs(ctx, report);
  return ok && written == 0 ? 0 : 1;
}

}  // namespace strata
