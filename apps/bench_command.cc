#include "apps/bench_command.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/nvme_bench.h"
#include "apps/scheduler_bench.h"

namespace strata {
namespace {

struct BenchCase {
  const char* name;
  const char* description;
  // Runs the case, prints its table and fills `json`; false on failure.
  std::function<bool(nlohmann::json& json)> run;
};

std::string g_timeline_path;  // set by RunBench for the cases that record one
NvmeBenchConfig g_nvme;  // directory, block size, queue depth from the flags

bool RunSchedulerCase(nlohmann::json& json) {
  SchedulerBenchConfig config;
  config.timeline_path = g_timeline_path;
  std::printf(
      "scheduler: %d layers x %llu MiB (model %llu MiB), device budget %llu "
      "MiB, simulated link %.1f GB/s, %.1f ms compute per layer; %d steps\n",
      config.layers, (unsigned long long)(config.layer_bytes >> 20),
      (unsigned long long)((config.layers * config.layer_bytes) >> 20),
      (unsigned long long)(config.device_budget_bytes >> 20), config.link_gbps,
      config.compute_seconds_per_layer * 1e3, config.steps);
  std::fflush(stdout);
  absl::StatusOr<SchedulerBenchResult> r = RunSchedulerBench(config);
  if (!r.ok()) {
    std::fprintf(stderr, "scheduler: %s\n", r.status().ToString().c_str());
    return false;
  }
  const double bound = std::max(r->compute_seconds, r->transfer_seconds);
  std::printf("  %-28s %10s %10s\n", "run", "step ms", "vs bound");
  auto row = [&](const char* name, double s) {
    std::printf("  %-28s %10.1f %10.3f\n", name, s * 1e3, s / bound);
  };
  row("scheduler (prefetch+Belady)", r->step_seconds);
  row("on demand (no prefetch)", r->step_seconds_on_demand);
  row("prefetch + LRU", r->step_seconds_lru);
  std::printf("  compute %.1f ms, transfer %.1f ms, bound max() %.1f ms\n",
              r->compute_seconds * 1e3, r->transfer_seconds * 1e3, bound * 1e3);
  std::printf(
      "  hit rate %.3f (static order), %.3f (one layer skipped per "
      "step, %llu re-records)\n",
      r->hit_rate, r->hit_rate_dynamic,
      (unsigned long long)r->rerecords_dynamic);
  json = {{"step_seconds", r->step_seconds},
          {"step_seconds_on_demand", r->step_seconds_on_demand},
          {"step_seconds_lru", r->step_seconds_lru},
          {"compute_seconds", r->compute_seconds},
          {"transfer_seconds", r->transfer_seconds},
          {"step_vs_bound", r->step_seconds / bound},
          {"hit_rate", r->hit_rate},
          {"hit_rate_dynamic", r->hit_rate_dynamic},
          {"rerecords_dynamic", r->rerecords_dynamic},
          {"model_bytes", r->model_bytes},
          {"device_budget_bytes", config.device_budget_bytes},
          {"link_gbps", config.link_gbps},
          {"device", "simulated"}};
  return true;
}

bool RunNvmeCase(nlohmann::json& json) {
  const NvmeBenchConfig config = g_nvme;
  std::printf(
      "nvme: sequential %llu MiB in %s, block %llu KiB, queue depth %u, "
      "O_DIRECT (the page cache cannot flatter it), median of %d\n",
      (unsigned long long)(config.size_bytes >> 20), config.directory.c_str(),
      (unsigned long long)(config.block_bytes >> 10), config.queue_depth,
      config.samples);
  std::fflush(stdout);
  absl::StatusOr<NvmeBenchResult> r = RunNvmeBench(config);
  if (!r.ok()) {
    std::fprintf(stderr, "nvme: %s\n", r.status().ToString().c_str());
    return false;
  }
  std::printf("  %-8s %12s %12s %8s\n", "op", "strata GB/s", "fio GB/s",
              "ratio");
  auto row = [&](const char* op, double ours, std::optional<double> fio) {
    if (fio) {
      std::printf("  %-8s %12.2f %12.2f %8.3f\n", op, ours, *fio, ours / *fio);
    } else {
      std::printf("  %-8s %12.2f %12s %8s\n", op, ours, "-", "-");
    }
  };
  row("read", r->read_gbps, r->fio_read_gbps);
  row("write", r->write_gbps, r->fio_write_gbps);
  if (!r->fio_note.empty()) std::printf("  fio: %s\n", r->fio_note.c_str());
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
  return true;
}

const std::vector<BenchCase>& Cases() {
  static const std::vector<BenchCase> cases = {
      {"scheduler",
       "layered forward/backward workload on the simulated device: step time "
       "with the scheduler vs on demand vs LRU, prefetch hit rates",
       RunSchedulerCase},
      {"nvme",
       "sequential 1 MiB reads and writes at queue depth 32 through the "
       "store's NVMe path, next to fio with the same settings",
       RunNvmeCase},
  };
  return cases;
}

}  // namespace

int RunBench(const std::string& selector, bool list,
             const std::string& json_path, const std::string& timeline_path,
             const StoreOptions& store) {
  g_timeline_path = timeline_path;
  if (!store.nvme.directories.empty()) {
    g_nvme.directory = store.nvme.directories.front();
  }
  g_nvme.block_bytes = store.nvme.block_size_bytes;
  g_nvme.queue_depth = store.nvme.queue_depth;
  if (list) {
    for (const BenchCase& c : Cases()) {
      std::printf("%-12s %s\n", c.name, c.description);
    }
    return 0;
  }
  nlohmann::json report = nlohmann::json::object();
  bool ran = false, ok = true;
  for (const BenchCase& c : Cases()) {
    if (std::string(c.name).rfind(selector, 0) != 0) continue;
    ran = true;
    nlohmann::json result;
    ok = c.run(result) && ok;
    report[c.name] = result;
  }
  if (!ran) {
    std::fprintf(stderr,
                 "strata bench: no case named '%s'; `strata bench --list` "
                 "lists them\n",
                 selector.c_str());
    return 2;
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "strata bench: cannot write %s\n",
                   json_path.c_str());
      return 1;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace strata
