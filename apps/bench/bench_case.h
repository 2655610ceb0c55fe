// bench_case.h: what a `strata bench` case is to the command that runs it
// (bench_command.cc): a name, a description, whether it applies here, and a
// run that sizes its measurement from the request, prints its table and fills
// its JSON. Each case is defined beside its measurement, in the file named
// next to its factory below.
#ifndef STRATA_APPS_BENCH_BENCH_CASE_H_
#define STRATA_APPS_BENCH_BENCH_CASE_H_

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "apps/bench/bench_command.h"
#include "apps/bench/nvme_sweep.h"
#include "strata/profile.h"

namespace strata {

// What the cases share while they run: the request, the progress line, and
// the machine profile they fill in.
struct BenchContext {
  const BenchRequest& request;
  MachineProfile profile;
  bool profiled = false;  // some case measured a part of the profile
  std::optional<NvmeSweepResult> sweep;  // for --plot
  int index = 0;                         // the case running, from 1
  int count = 0;                         // cases selected
  bool tty = false;                      // stderr is a terminal

  // "[2/5] nvme: read 64 MiB": redrawn in place on a terminal; only the
  // case's first line otherwise, so logs stay short.
  void Progress(const char* name, const std::string& what) const;
  void ClearProgress() const;
};

struct BenchCase {
  const char* name;
  const char* description;
  // Empty when the case applies here; otherwise why not.
  std::function<std::string(const BenchRequest&)> why_not;
  // Runs the case, prints its table and fills `json`.
  std::function<absl::Status(BenchContext&, nlohmann::json&)> run;
};

// A why_not for the cases that apply everywhere.
inline std::string Always(const BenchRequest&) { return ""; }

// The why_not of the NVMe cases: the request names an NVMe directory.
std::string NeedsNvmeDir(const BenchRequest& request);  // nvme_bench.cc

// The cases, in the order `strata bench` runs and lists them.
BenchCase LinkCase();        // link_bench.cc
BenchCase LinkUmCase();      // um_link_bench.cc
BenchCase NvmeCase();        // nvme_bench.cc
BenchCase NvmeDeviceCase();  // nvme_device_bench.cc
BenchCase NvmeSweepCase();   // nvme_sweep.cc
BenchCase SchedulerCase();   // scheduler_bench.cc
BenchCase UnifiedCase();     // scheduler_bench.cc

}  // namespace strata

#endif  // STRATA_APPS_BENCH_BENCH_CASE_H_
