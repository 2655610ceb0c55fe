#include "apps/bench_command.h"

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

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

const std::vector<BenchCase>& Cases() {
  static const std::vector<BenchCase> cases = {
      {"scheduler",
       "layered forward/backward workload on the simulated device: step time "
       "with the scheduler vs on demand vs LRU, prefetch hit rates",
       RunSchedulerCase},
  };
  return cases;
}

}  // namespace

int RunBench(const std::string& selector, bool list,
             const std::string& json_path, const std::string& timeline_path) {
  g_timeline_path = timeline_path;
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
