// scheduler_bench.cc: the layered workload's runs (see scheduler_bench.h),
// and the `scheduler` and `unified` cases of `strata bench` that report them.
#include "apps/bench/scheduler_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench/bench_case.h"
#include "base/byte_size.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata {
namespace {

using Clock = std::chrono::steady_clock;

struct Variant {
  EvictionPolicy eviction = EvictionPolicy::kBelady;
  bool prefetch = true;
  bool skip_a_layer = false;
  std::string timeline_path;
  DeviceMemory memory = DeviceMemory::kExplicitCopies;
  bool unified_hints = true;
};

struct VariantResult {
  double median_step_seconds = 0;
  double hit_rate = 0;
  double h2d_bytes_per_step = 0;
  double d2h_bytes_per_step = 0;
  double faults_per_step = 0;
  uint64_t rerecords = 0;
};

void BusyFor(double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
  }
}

// The access order of one step: forward then backward, without `skip`.
std::vector<int> StepOrder(int layers, int skip) {
  std::vector<int> order;
  for (int i = 0; i < layers; ++i) {
    if (i != skip) order.push_back(i);
  }
  for (int i = layers - 1; i >= 0; --i) {
    if (i != skip) order.push_back(i);
  }
  return order;
}

absl::Status RunStep(Store& store, const std::vector<TensorId>& ids,
                     const std::vector<int>& order, double compute) {
  store.BeginStep();
  for (int layer : order) {
    STRATA_ASSIGN_OR_RETURN(
        Lease lease, store.Acquire(ids[layer], Tier::kDevice, Access::kRead));
    BusyFor(compute);
    STRATA_RETURN_IF_ERROR(lease.Release());
  }
  store.EndStep();
  return absl::OkStatus();
}

absl::StatusOr<VariantResult> RunVariant(const SchedulerBenchConfig& c,
                                         const Variant& v) {
  StoreOptions o;
  o.device.backend = DeviceBackendKind::kSimulated;
  o.device.budget_bytes = c.device_budget_bytes;
  o.device.sim_link_gbps = c.link_gbps;
  o.host.budget_bytes = c.layers * c.layer_bytes + 16 * kMiB;
  o.host.lock_memory = false;
  o.scheduler.eviction = v.eviction;
  o.scheduler.prefetch = v.prefetch;
  o.device.memory = v.memory;
  o.device.unified_hints = v.unified_hints;
  o.timeline = !v.timeline_path.empty();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(o));
  std::vector<TensorId> ids;
  const std::vector<char> bytes(c.layer_bytes, 1);
  for (int i = 0; i < c.layers; ++i) {
    STRATA_ASSIGN_OR_RETURN(TensorId id,
                            store->Create({.name = "layer" + std::to_string(i),
                                           .size_bytes = c.layer_bytes,
                                           .kind = TensorKind::kParameter,
                                           .home = Tier::kHost}));
    STRATA_RETURN_IF_ERROR(store->Write(id, bytes.data(), bytes.size()));
    ids.push_back(id);
  }
  std::mt19937 rng(c.seed);
  // Step 1 records the trace (all layers); steps 2+ are measured.
  STRATA_RETURN_IF_ERROR(RunStep(*store, ids, StepOrder(c.layers, -1),
                                 c.compute_seconds_per_layer));
  const Stats before = store->GetStats();
  std::vector<double> seconds;
  for (int step = 1; step < c.steps; ++step) {
    const int skip = v.skip_a_layer ? static_cast<int>(rng() % c.layers) : -1;
    const auto start = Clock::now();
    STRATA_RETURN_IF_ERROR(RunStep(*store, ids, StepOrder(c.layers, skip),
                                   c.compute_seconds_per_layer));
    seconds.push_back(
        std::chrono::duration<double>(Clock::now() - start).count());
  }
  const Stats after = store->GetStats();
  if (o.timeline) STRATA_RETURN_IF_ERROR(store->WriteTimeline(v.timeline_path));
  std::sort(seconds.begin(), seconds.end());
  VariantResult r;
  r.median_step_seconds = seconds[seconds.size() / 2];
  const double acquires = after.acquires - before.acquires;
  r.hit_rate =
      1.0 - (after.stalled_acquires - before.stalled_acquires) / acquires;
  r.h2d_bytes_per_step =
      double(after.links[0].bytes - before.links[0].bytes) / seconds.size();
  r.d2h_bytes_per_step =
      double(after.links[1].bytes - before.links[1].bytes) / seconds.size();
  r.faults_per_step =
      double(after.unified.faults - before.unified.faults) / seconds.size();
  r.rerecords = after.scheduler.rerecords - before.scheduler.rerecords;
  return r;
}

ResidencyRun AsResidencyRun(const VariantResult& v) {
  return {.step_seconds = v.median_step_seconds,
          .hit_rate = v.hit_rate,
          .h2d_bytes_per_step = v.h2d_bytes_per_step,
          .d2h_bytes_per_step = v.d2h_bytes_per_step,
          .faults_per_step = v.faults_per_step};
}

}  // namespace

absl::StatusOr<UnifiedBenchResult> RunUnifiedBench(
    const SchedulerBenchConfig& c) {
  STRATA_ASSIGN_OR_RETURN(VariantResult copies, RunVariant(c, {}));
  STRATA_ASSIGN_OR_RETURN(VariantResult hints,
                          RunVariant(c, {.timeline_path = c.timeline_path,
                                         .memory = DeviceMemory::kUnified}));
  STRATA_ASSIGN_OR_RETURN(VariantResult faults,
                          RunVariant(c, {.memory = DeviceMemory::kUnified,
                                         .unified_hints = false}));
  UnifiedBenchResult r;
  r.copies = AsResidencyRun(copies);
  r.unified_hints = AsResidencyRun(hints);
  r.unified_faults = AsResidencyRun(faults);
  r.compute_seconds = 2.0 * c.layers * c.compute_seconds_per_layer;
  r.bound_seconds = std::max(r.compute_seconds,
                             copies.h2d_bytes_per_step / (c.link_gbps * 1e9));
  return r;
}

absl::StatusOr<SchedulerBenchResult> RunSchedulerBench(
    const SchedulerBenchConfig& c) {
  STRATA_ASSIGN_OR_RETURN(VariantResult sched,
                          RunVariant(c, {.timeline_path = c.timeline_path}));
  STRATA_ASSIGN_OR_RETURN(VariantResult on_demand,
                          RunVariant(c, {.prefetch = false}));
  STRATA_ASSIGN_OR_RETURN(VariantResult lru,
                          RunVariant(c, {.eviction = EvictionPolicy::kLru}));
  STRATA_ASSIGN_OR_RETURN(VariantResult dynamic,
                          RunVariant(c, {.skip_a_layer = true}));
  SchedulerBenchResult r;
  r.step_seconds = sched.median_step_seconds;
  r.step_seconds_on_demand = on_demand.median_step_seconds;
  r.step_seconds_lru = lru.median_step_seconds;
  r.compute_seconds = 2.0 * c.layers * c.compute_seconds_per_layer;
  r.transfer_seconds = sched.h2d_bytes_per_step / (c.link_gbps * 1e9);
  r.hit_rate = sched.hit_rate;
  r.hit_rate_dynamic = dynamic.hit_rate;
  r.rerecords_dynamic = dynamic.rerecords;
  r.model_bytes = uint64_t(c.layers) * c.layer_bytes;
  return r;
}

// The `scheduler` and `unified` cases of `strata bench` (bench_case.h): the
// layered workload as the request sizes it, their tables and their JSON.

namespace {

// The layered workload of the scheduler and unified cases, as the request
// sizes it; prints its one-line description after `name`.
SchedulerBenchConfig LayeredWorkload(const BenchContext& ctx,
                                     const char* name) {
  SchedulerBenchConfig config;
  config.timeline_path = ctx.request.timeline_path;
  if (ctx.request.quick) {
    config.layers = 6;
    config.layer_bytes = 256 << 10;
    config.device_budget_bytes = 1 << 20;
    config.link_gbps = 1.0;
    config.compute_seconds_per_layer = 0.0002;
    config.steps = 4;
  }
  // The case has its own link model unless --sim-link-gbps names one.
  if (ctx.request.store.device.sim_link_gbps > 0) {
    config.link_gbps = ctx.request.store.device.sim_link_gbps;
  }
  absl::PrintF(
      "%s: %d layers x %s (model %s), device budget %s, simulated "
      "link %.1f GB/s, %.1f ms compute per layer; %d steps\n",
      name, config.layers, FormatByteSize(config.layer_bytes),
      FormatByteSize(config.layers * config.layer_bytes),
      FormatByteSize(config.device_budget_bytes), config.link_gbps,
      config.compute_seconds_per_layer * 1e3, config.steps);
  std::fflush(stdout);
  return config;
}

absl::Status RunSchedulerCase(BenchContext& ctx, nlohmann::json& json) {
  const SchedulerBenchConfig config = LayeredWorkload(ctx, "scheduler");
  ctx.Progress("scheduler", "scheduler, on demand, LRU runs");
  absl::StatusOr<SchedulerBenchResult> r = RunSchedulerBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  const double bound = std::max(r->compute_seconds, r->transfer_seconds);
  absl::PrintF("  %-28s %10s %10s\n", "run", "step ms", "vs bound");
  auto row = [&](const char* name, double s) {
    absl::PrintF("  %-28s %10.1f %10.3f\n", name, s * 1e3, s / bound);
  };
  row("scheduler (prefetch+Belady)", r->step_seconds);
  row("on demand (no prefetch)", r->step_seconds_on_demand);
  row("prefetch + LRU", r->step_seconds_lru);
  absl::PrintF("  compute %.1f ms, transfer %.1f ms, bound max() %.1f ms\n",
               r->compute_seconds * 1e3, r->transfer_seconds * 1e3,
               bound * 1e3);
  absl::PrintF(
      "  hit rate %.3f (static order), %.3f (one layer skipped per step, %d "
      "re-records)\n",
      r->hit_rate, r->hit_rate_dynamic, r->rerecords_dynamic);
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
  return absl::OkStatus();
}

absl::Status RunUnifiedCase(BenchContext& ctx, nlohmann::json& json) {
  const SchedulerBenchConfig config = LayeredWorkload(ctx, "unified");
  ctx.Progress("unified", "explicit copies, unified with and without hints");
  absl::StatusOr<UnifiedBenchResult> r = RunUnifiedBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF("  %-30s %9s %9s %9s %10s %10s %9s\n", "residency", "step ms",
               "vs bound", "hit rate", "h2d MB/st", "d2h MB/st", "faults/st");
  auto row = [&](const char* name, const ResidencyRun& run) {
    absl::PrintF("  %-30s %9.1f %9.3f %9.3f %10.1f %10.1f %9.1f\n", name,
                 run.step_seconds * 1e3, run.step_seconds / r->bound_seconds,
                 run.hit_rate, run.h2d_bytes_per_step / 1e6,
                 run.d2h_bytes_per_step / 1e6, run.faults_per_step);
  };
  row("explicit copies (scheduler)", r->copies);
  row("unified memory, prefetch hints", r->unified_hints);
  row("unified memory, no hints", r->unified_faults);
  absl::PrintF(
      "  bound max(compute %.1f ms, copies' transfer) %.1f ms; faults are "
      "served at link speed here (on a GPU they are slower)\n",
      r->compute_seconds * 1e3, r->bound_seconds * 1e3);
  auto run_json = [](const ResidencyRun& run) {
    return nlohmann::json{{"step_seconds", run.step_seconds},
                          {"hit_rate", run.hit_rate},
                          {"h2d_bytes_per_step", run.h2d_bytes_per_step},
                          {"d2h_bytes_per_step", run.d2h_bytes_per_step},
                          {"faults_per_step", run.faults_per_step}};
  };
  json = {{"copies", run_json(r->copies)},
          {"unified_hints", run_json(r->unified_hints)},
          {"unified_no_hints", run_json(r->unified_faults)},
          {"hints_vs_copies",
           r->unified_hints.step_seconds / r->copies.step_seconds},
          {"no_hints_vs_hints",
           r->unified_faults.step_seconds / r->unified_hints.step_seconds},
          {"compute_seconds", r->compute_seconds},
          {"bound_seconds", r->bound_seconds},
          {"model_bytes", uint64_t(config.layers) * config.layer_bytes},
          {"device_budget_bytes", config.device_budget_bytes},
          {"link_gbps", config.link_gbps},
          {"device", "simulated"}};
  return absl::OkStatus();
}

}  // namespace

BenchCase SchedulerCase() {
  return {
      "scheduler",
      "layered forward/backward workload on the simulated device: step time "
      "with the scheduler vs on demand vs LRU, prefetch hit rates",
      Always, RunSchedulerCase};
}

BenchCase UnifiedCase() {
  return {"unified",
          "the same layered workload three ways: explicit copies vs unified "
          "memory with prefetch hints vs unified memory without hints (faults)",
          Always, RunUnifiedCase};
}

}  // namespace strata
