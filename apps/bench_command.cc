// bench_command.cc: the `strata bench` case table and its driver (see
// bench_command.h).
#include "apps/bench_command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/bench_plot.h"
#include "apps/link_bench.h"
#include "apps/nvme_bench.h"
#include "apps/nvme_device_bench.h"
#include "apps/nvme_sweep.h"
#include "apps/output_path.h"
#include "apps/scheduler_bench.h"
#include "apps/um_link_bench.h"
#include "base/byte_size.h"
#include "strata/profile.h"
#include "strata/status.h"
#include "tiers/device/device_backend.h"
#include "tiers/nvme/request_shape.h"

namespace strata {
namespace {

// What the cases share while they run: the request, the progress line, and
// the machine profile they fill in.
struct BenchContext {
  const BenchRequest& request;
  MachineProfile profile;
  bool profiled = false;  // some case measured a part of the profile
  std::optional<NvmeSweepResult> sweep;  // for --plot
  int index = 0;                         // the case running, from 1
  int count = 0;                         // cases selected
  bool tty = isatty(STDERR_FILENO) == 1;

  // "[2/5] nvme: read 64 MiB": redrawn in place on a terminal; only the
  // case's first line otherwise, so logs stay short.
  void Progress(const char* name, const std::string& what) const {
    if (!tty) return;
    std::fprintf(stderr, "\r[%d/%d] %s: %s\x1b[K", index, count, name,
                 what.c_str());
    std::fflush(stderr);
  }
  void ClearProgress() const {
    if (tty) std::fputs("\r\x1b[K", stderr);
  }
};

struct BenchCase {
  const char* name;
  const char* description;
  // Empty when the case applies here; otherwise why not.
  std::function<std::string(const BenchRequest&)> why_not;
  // Runs the case, prints its table and fills `json`.
  std::function<absl::Status(BenchContext&, nlohmann::json&)> run;
};

std::string Always(const BenchRequest&) { return ""; }

std::string NeedsNvmeDir(const BenchRequest& r) {
  return r.store.nvme.directories.empty()
             ? "no NVMe directory (--nvme-dir is empty)"
             : "";
}

// Unified-memory link speeds mean something only on a GPU: on the simulated
// device a prefetch is its link model (the unified case shows that).
std::string NeedsGpu(const BenchRequest& r) {
  DeviceOptions options = r.store.device;
  options.budget_bytes = 256;  // probing only
  std::string why;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> device =
      OpenDeviceBackend(options, &why);
  if (!device.ok()) return std::string(device.status().message());
  if (!(*device)->is_simulated()) return "";
  return absl::StrFormat(
      "needs a GPU (%s); on the simulated device a prefetch is just its link "
      "model: see -t unified",
      why);
}

nlohmann::json PointsJson(const std::vector<LinkBenchPoint>& points) {
  nlohmann::json j = nlohmann::json::array();
  for (const LinkBenchPoint& p : points) {
    j.push_back({{"bytes", p.bytes}, {"gbps", p.gbps}});
  }
  return j;
}

absl::Status RunLinkCase(BenchContext& ctx, nlohmann::json& json) {
  LinkBenchConfig config;
  config.device = ctx.request.store.device;
  if (ctx.request.quick) {
    config.sizes = {64 << 10, 1 << 20};
    config.samples = 3;
    config.min_sample_bytes = 4 << 20;
  }
  config.progress = [&](const std::string& what) {
    ctx.Progress("link", what);
  };
  absl::StatusOr<LinkBenchResult> r = RunLinkBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF(
      "link: %s; copies through the store's device backend, median of %d "
      "samples, bytes verified; GB/s (1e9)\n",
      r->device, config.samples);
  absl::PrintF("  %-10s %11s %11s %13s %13s %9s\n", "size", "h2d pinned",
               "d2h pinned", "h2d pageable", "d2h pageable", "d2d");
  for (size_t i = 0; i < config.sizes.size(); ++i) {
    absl::PrintF("  %-10s %11.2f %11.2f %13.2f %13.2f %9.2f\n",
                 FormatByteSize(config.sizes[i]), r->h2d_pinned[i].gbps,
                 r->d2h_pinned[i].gbps, r->h2d_pageable[i].gbps,
                 r->d2h_pageable[i].gbps, r->d2d[i].gbps);
  }
  json = {{"device", r->device},
          {"samples", config.samples},
          {"h2d_pinned", PointsJson(r->h2d_pinned)},
          {"d2h_pinned", PointsJson(r->d2h_pinned)},
          {"h2d_pageable", PointsJson(r->h2d_pageable)},
          {"d2h_pageable", PointsJson(r->d2h_pageable)},
          {"d2d", PointsJson(r->d2d)}};
  ctx.profile.device = r->device;
  for (const LinkBenchPoint& p : r->h2d_pinned) {
    ctx.profile.h2d.push_back({.bytes = p.bytes, .gbps = p.gbps});
  }
  for (const LinkBenchPoint& p : r->d2h_pinned) {
    ctx.profile.d2h.push_back({.bytes = p.bytes, .gbps = p.gbps});
  }
  ctx.profiled = true;
  return absl::OkStatus();
}

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

absl::Status RunLinkUmCase(BenchContext& ctx, nlohmann::json& json) {
  UnifiedLinkBenchConfig config;
  config.cuda_device = ctx.request.store.device.cuda_device;
  config.bytes = ctx.request.quick ? 64 << 20 : ctx.request.nvme_bytes;
  config.progress = [&](const std::string& what) {
    ctx.Progress("link-um", what);
  };
  absl::PrintF(
      "link-um: %s managed buffer (cudaMallocManaged), on the host before "
      "each sample; median of %d event-timed samples; GB/s (1e9)\n",
      FormatByteSize(config.bytes), config.samples);
  std::fflush(stdout);
  absl::StatusOr<UnifiedLinkBenchResult> r = RunUnifiedLinkBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  auto row = [&](const char* what, double gbps) {
    if (gbps > 0) {
      absl::PrintF("  %-46s %8.2f %8.3f\n", what, gbps,
                   gbps / r->pinned_copy_gbps);
    } else {
      absl::PrintF("  %-46s %8s %8s\n", what, "n/a", "-");
    }
  };
  absl::PrintF("  %-46s %8s %8s\n", "mechanism", "GB/s", "vs pinned");
  row("first-touch faults (streaming kernel)", r->fault_gbps);
  row("cudaMemPrefetchAsync -> device", r->prefetch_gbps);
  row("cudaMemPrefetchBatchAsync, 2 MiB chunks", r->batch_prefetch_gbps);
  row("cudaMemDiscardAndPrefetchBatchAsync (dead data)",
      r->discard_prefetch_gbps);
  row("cudaMemPrefetchAsync -> host (eviction)", r->evict_gbps);
  row("pinned cudaMemcpyAsync (ceiling)", r->pinned_copy_gbps);
  absl::PrintF("  %s; %s verified after the prefetches\n", r->device,
               FormatByteSize(r->verified_bytes));
  json = {{"device", r->device},
          {"bytes", r->bytes},
          {"fault_gbps", r->fault_gbps},
          {"prefetch_gbps", r->prefetch_gbps},
          {"batch_prefetch_gbps", r->batch_prefetch_gbps},
          {"discard_prefetch_gbps", r->discard_prefetch_gbps},
          {"evict_gbps", r->evict_gbps},
          {"pinned_copy_gbps", r->pinned_copy_gbps},
          {"batched", r->batched},
          {"verified_bytes", r->verified_bytes},
          {"samples", config.samples}};
  return absl::OkStatus();
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
  config.size_bytes = ctx.request.quick ? 4 << 20 : ctx.request.nvme_bytes;
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

absl::Status RunNvmeDeviceCase(BenchContext& ctx, nlohmann::json& json) {
  NvmeDeviceBenchConfig config;
  config.store = ctx.request.store;
  if (ctx.request.quick) {
    config.tensor_bytes = 1 << 20;
    config.tensors = 2;
  }
  // Budgets for what this case moves, not the training defaults: the NVMe
  // directory then needs only that much free space.
  const uint64_t block = config.store.nvme.block_size_bytes;
  const uint64_t all = config.tensors * config.tensor_bytes;
  config.store.nvme.budget_bytes = (all + 2 * block) / block * block;
  config.store.device.budget_bytes = config.tensor_bytes + (1 << 20);
  config.store.host.budget_bytes = config.tensor_bytes + (1 << 20);
  absl::PrintF(
      "nvme-device: %d tensors x %s homed on NVMe, loaded to the device "
      "through the store's pinned bounce chunks (block %s, queue depth %d), "
      "median of %d, bytes verified\n",
      config.tensors, FormatByteSize(config.tensor_bytes),
      FormatByteSize(config.store.nvme.block_size_bytes),
      config.store.nvme.queue_depth, config.samples);
  std::fflush(stdout);
  ctx.Progress("nvme-device", "loading");
  absl::StatusOr<NvmeDeviceBenchResult> r = RunNvmeDeviceBench(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  absl::PrintF("  %-22s %10s\n", "path", "GB/s");
  absl::PrintF("  %-22s %10.2f\n", "NVMe -> device", r->nvme_to_device_gbps);
  absl::PrintF("  %-22s %10.2f\n", "NVMe read (baseline)", r->nvme_read_gbps);
  absl::PrintF("  ratio %.3f (device %s, %s)\n", r->ratio, r->device,
               r->engine);
  json = {{"nvme_to_device_gbps", r->nvme_to_device_gbps},
          {"nvme_read_gbps", r->nvme_read_gbps},
          {"ratio", r->ratio},
          {"tensor_bytes", config.tensor_bytes},
          {"tensors", config.tensors},
          {"verified_bytes", r->verified_bytes},
          {"device", r->device},
          {"engine", r->engine}};
  return absl::OkStatus();
}

// The sweep's grid: one row per block size, "read/write" GB/s per depth.
void PrintSweep(const NvmeSweepConfig& c, const NvmeSweepResult& r) {
  absl::PrintF("  %-10s", "block \\ QD");
  for (uint32_t qd : c.queue_depths) absl::PrintF(" %11d", qd);
  absl::PrintF("   (read/write GB/s)\n");
  size_t i = 0;
  for (uint64_t block : c.block_sizes) {
    absl::PrintF("  %-10s", FormatByteSize(block));
    for (size_t q = 0; q < c.queue_depths.size(); ++q, ++i) {
      absl::PrintF(" %5.2f/%5.2f", r.points[i].read_gbps,
                   r.points[i].write_gbps);
    }
    absl::PrintF("\n");
  }
  absl::PrintF("  best: block %s, queue depth %d: read %.2f, write %.2f GB/s\n",
               FormatByteSize(r.best.block_bytes), r.best.queue_depth,
               r.best.read_gbps, r.best.write_gbps);
  if (r.fio_read_gbps && r.fio_write_gbps) {
    absl::PrintF(
        "  fio at the best point: read %.2f, write %.2f GB/s; strata/fio "
        "%.3f read, %.3f write\n",
        *r.fio_read_gbps, *r.fio_write_gbps,
        r.best.read_gbps / *r.fio_read_gbps,
        r.best.write_gbps / *r.fio_write_gbps);
  } else if (!r.fio_note.empty()) {
    absl::PrintF("  fio: %s\n", r.fio_note);
  }
}

absl::Status RunNvmeSweepCase(BenchContext& ctx, nlohmann::json& json) {
  NvmeSweepConfig config;
  config.directory = ctx.request.store.nvme.directories.front();
  config.engine = ctx.request.store.nvme.engine;
  if (ctx.request.quick) {
    config.block_sizes = {4 << 10, 64 << 10};
    config.queue_depths = {1, 4};
    config.bytes_per_point = 1 << 20;
  }
  config.progress = [&](int done, int total, const std::string& what) {
    ctx.Progress("nvme-sweep", absl::StrFormat("%d/%d %s", done, total, what));
  };
  absl::PrintF(
      "nvme-sweep: block size x queue depth in %s, O_DIRECT, up to %s per "
      "pass, median of %d, bytes verified\n",
      config.directory, FormatByteSize(config.bytes_per_point), config.samples);
  std::fflush(stdout);
  absl::StatusOr<NvmeSweepResult> r = RunNvmeSweep(config);
  ctx.ClearProgress();
  if (!r.ok()) return r.status();
  PrintSweep(config, *r);
  nlohmann::json points = nlohmann::json::array();
  for (const NvmeSweepPoint& p : r->points) {
    points.push_back({{"block_size_bytes", p.block_bytes},
                      {"queue_depth", p.queue_depth},
                      {"read_gbps", p.read_gbps},
                      {"write_gbps", p.write_gbps},
                      {"sample_bytes", p.sample_bytes}});
  }
  json = {{"points", points},
          {"best",
           {{"block_size_bytes", r->best.block_bytes},
            {"queue_depth", r->best.queue_depth},
            {"read_gbps", r->best.read_gbps},
            {"write_gbps", r->best.write_gbps}}},
          {"engine", r->engine},
          {"directory", config.directory}};
  if (r->fio_read_gbps && r->fio_write_gbps) {
    json["fio_read_gbps"] = *r->fio_read_gbps;
    json["fio_write_gbps"] = *r->fio_write_gbps;
  }
  ctx.profile.nvme_block_size_bytes = r->best.block_bytes;
  ctx.profile.nvme_queue_depth = r->best.queue_depth;
  ctx.profile.nvme_read_gbps = r->best.read_gbps;
  ctx.profile.nvme_write_gbps = r->best.write_gbps;
  ctx.profile.nvme_directory = config.directory;
  ctx.profiled = true;
  ctx.sweep = *std::move(r);
  return absl::OkStatus();
}

const std::vector<BenchCase>& Cases() {
  static const std::vector<BenchCase> cases = {
      {"link",
       "host<->device copies from pinned and pageable memory, and "
       "device-local copies, 64 KiB to 256 MiB",
       Always, RunLinkCase},
      {"link-um",
       "managed memory to the GPU by first-touch faults, cudaMemPrefetchAsync, "
       "batched and discarding prefetches, and back; --bench-size bytes",
       NeedsGpu, RunLinkUmCase},
      {"nvme",
       "sequential reads and writes through the store's own NVMe path at "
       "--block-size and --queue-depth, next to fio with the same settings",
       NeedsNvmeDir, RunNvmeCase},
      {"nvme-device",
       "NVMe -> device through the store's pinned bounce-chunk pipeline, "
       "next to the NVMe read it is built on",
       NeedsNvmeDir, RunNvmeDeviceCase},
      {"nvme-sweep",
       "NVMe block size (4 KiB-16 MiB) x queue depth (1-128) sweep; reports "
       "the best setting (--profile saves it), fio at that point",
       NeedsNvmeDir, RunNvmeSweepCase},
      {"scheduler",
       "layered forward/backward workload on the simulated device: step time "
       "with the scheduler vs on demand vs LRU, prefetch hit rates",
       Always, RunSchedulerCase},
      {"unified",
       "the same layered workload three ways: explicit copies vs unified "
       "memory with prefetch hints vs unified memory without hints (faults)",
       Always, RunUnifiedCase},
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
  for (size_t i = 0; i < std::size(outputs); ++i) {
    const auto& [path, flag] = outputs[i];
    if (absl::Status s = CheckWritable(path, flag); !s.ok()) return s;
    for (size_t j = 0; j < i && !path.empty(); ++j) {
      if (outputs[j].first == path) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s and %s both name %s; give each output its own file", flag,
            outputs[j].second, path));
      }
    }
  }
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
  if (!r.quick && (r.nvme_bytes < block || r.nvme_bytes % block != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--bench-size=%s: must be a whole number of --block-size=%s requests "
        "(at least one)",
        FormatByteSize(r.nvme_bytes), FormatByteSize(block)));
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
      std::fprintf(stderr, "strata bench: --plot: %s\n", s.ToString().c_str());
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
      std::fprintf(stderr, "strata bench: %s\n", s.ToString().c_str());
      return 1;
    }
    absl::PrintF("profile written to %s (load it with --machine-profile)\n",
                 r.profile_path);
  }
  return 0;
}

}  // namespace

int RunBench(const BenchRequest& request) {
  if (request.list) return List(request);
  absl::Status checked = CheckOutputs(request);
  if (checked.ok()) checked = CheckNvmeSettings(request);
  if (absl::Status s = checked; !s.ok()) {
    std::fprintf(stderr, "strata bench: %s\n", s.ToString().c_str());
    return 2;
  }
  BenchContext ctx{.request = request};
  for (const BenchCase& c : Cases())
    ctx.count += Selected(c.name, request.selector);
  if (ctx.count == 0) {
    std::fprintf(stderr,
                 "strata bench: no case named '%s'; `strata bench --list` "
                 "lists them\n",
                 request.selector.c_str());
    return 2;
  }
  if (!request.plot_path.empty() && !Selected("nvme-sweep", request.selector)) {
    std::fprintf(stderr,
                 "strata bench: --plot draws the nvme-sweep case, which '-t "
                 "%s' does not select\n",
                 request.selector.c_str());
    return 2;
  }
  if (!request.profile_path.empty() && !Selected("link", request.selector) &&
      !Selected("nvme-sweep", request.selector)) {
    std::fprintf(stderr,
                 "strata bench: --profile needs the link or nvme-sweep case, "
                 "which '-t %s' does not select\n",
                 request.selector.c_str());
    return 2;
  }
  nlohmann::json report = nlohmann::json::object();
  bool ok = true;
  for (const BenchCase& c : Cases()) {
    if (!Selected(c.name, request.selector)) continue;
    ++ctx.index;
    if (const std::string why = c.why_not(request); !why.empty()) {
      absl::PrintF("%s: not run here: %s\n", c.name, why);
      report[c.name] = {{"applies", false}, {"why_not", why}};
      continue;
    }
    if (!ctx.tty) {
      std::fprintf(stderr, "[%d/%d] %s ...\n", ctx.index, ctx.count, c.name);
    }
    nlohmann::json result;
    if (absl::Status s = c.run(ctx, result); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, s.ToString().c_str());
      report[c.name] = {{"applies", true}, {"error", s.ToString()}};
      ok = false;
      continue;
    }
    result["applies"] = true;
    report[c.name] = result;
  }
  const int written = WriteOutputs(ctx, report);
  return ok && written == 0 ? 0 : 1;
}

}  // namespace strata
