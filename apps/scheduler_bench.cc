#include "apps/scheduler_bench.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

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

}  // namespace strata
