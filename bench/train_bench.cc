// train_bench: the same short training run three ways in one invocation —
// resident (every tensor on the device, nothing moves), offloaded with the
// scheduler (prefetch + Belady eviction), and offloaded with prefetch off
// (on-demand loads) — and their step-time ratios against the resident run.
// The losses of all three must be bitwise equal; the bench says whether they
// are.
//
//   build/default/bench/train_bench [--steps=40] [--json=FILE] [--help]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "strata/store.h"
#include "train/dataset.h"
#include "train/metrics.h"
#include "train/setup.h"
#include "train/trainer.h"

ABSL_FLAG(int64_t, steps, 40, "Timed training steps per mode.");
ABSL_FLAG(int64_t, warmup, 5,
          "Untimed steps first (the scheduler learns the order in step 1).");
ABSL_FLAG(int64_t, width, 1024, "Units per hidden layer.");
ABSL_FLAG(int32_t, depth, 5, "Hidden layers.");
ABSL_FLAG(int64_t, batch, 256, "Samples per step.");
ABSL_FLAG(std::string, device, "auto", "auto, cuda or simulated.");
ABSL_FLAG(strata::ByteSize, device_budget, strata::ByteSize{16 * strata::kMiB},
          "Offloaded runs: device tier budget.");
ABSL_FLAG(strata::ByteSize, host_budget, strata::ByteSize{32 * strata::kMiB},
          "Offloaded runs: host tier budget.");
ABSL_FLAG(std::string, nvme_dir, "/var/tmp",
          "Offloaded runs: directory of the NVMe swap file.");
ABSL_FLAG(strata::ByteSize, nvme_budget, strata::ByteSize{512 * strata::kMiB},
          "Offloaded runs: NVMe tier budget.");
ABSL_FLAG(double, sim_link_gbps, 0,
          "Simulated device: host<->device GB/s (0 = memcpy speed).");
ABSL_FLAG(std::string, data_dir, strata::train::kFashionMnistDir,
          "Fashion-MNIST directory.");
ABSL_FLAG(std::string, json, "", "Also write the results as JSON here.");

namespace strata::train {
namespace {

struct Mode {
  const char* name;
  bool resident;
  bool prefetch;
};

struct ModeResult {
  std::string name;
  double step_ms = 0;  // median of the timed steps
  std::vector<double> losses;
  Stats stats;
  double hit_rate = 1;
};

absl::StatusOr<ModeResult> RunMode(const Mode& mode, const FashionMnist& data) {
  StoreOptions s;
  STRATA_ASSIGN_OR_RETURN(
      s.device.backend,
      ParseDeviceBackend(absl::GetFlag(FLAGS_device), "--device"));
  s.device.budget_bytes = absl::GetFlag(FLAGS_device_budget).bytes;
  s.device.sim_link_gbps = absl::GetFlag(FLAGS_sim_link_gbps);
  s.host.budget_bytes = absl::GetFlag(FLAGS_host_budget).bytes;
  s.nvme.directories = {absl::GetFlag(FLAGS_nvme_dir)};
  s.nvme.budget_bytes = absl::GetFlag(FLAGS_nvme_budget).bytes;
  s.scheduler.prefetch = mode.prefetch;
  TrainOptions t;
  t.model.width = absl::GetFlag(FLAGS_width);
  t.model.depth = absl::GetFlag(FLAGS_depth);
  t.model.batch = absl::GetFlag(FLAGS_batch);
  t.max_steps = absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_steps);
  t.epochs = 1000;  // max_steps ends the run
  t.evaluate = false;
  if (mode.resident) STRATA_RETURN_IF_ERROR(MakeResident(t, s));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TrainSetup> setup,
                          OpenTrainSetup(s, t));
  STRATA_ASSIGN_OR_RETURN(TrainResult r,
                          Train(*setup->model, data.train, data.test, t));
  const auto warmup = static_cast<size_t>(absl::GetFlag(FLAGS_warmup));
  if (r.step_seconds.size() <= warmup) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the run took %d steps, not more than --warmup=%d (one epoch at this "
        "--batch is that short); lower --warmup or --batch",
        r.step_seconds.size(), warmup));
  }
  ModeResult m{.name = mode.name, .losses = r.losses};
  const std::vector<double> timed(r.step_seconds.begin() + warmup,
                                  r.step_seconds.end());
  m.step_ms = Median(timed) * 1e3;
  m.stats = setup->store->GetStats();
  m.hit_rate = PrefetchHitRate(m.stats);
  return m;
}

// Random data of Fashion-MNIST's shape when the package is not installed:
// step times do not depend on the pixels.
FashionMnist SyntheticData() {
  FashionMnist d;
  for (Dataset* s : {&d.train, &d.test}) {
    s->count = 4096;
    s->rows = s->cols = 28;
    s->images.resize(s->count * 784);
    s->labels.resize(s->count);
    uint32_t x = 12345;
    for (float& v : s->images)
      v = float((x = x * 1664525 + 1013904223) >> 8) / (1 << 24);
    for (int64_t i = 0; i < s->count; ++i) s->labels[i] = int32_t(i % 10);
  }
  return d;
}

int Main() {
  if (absl::GetFlag(FLAGS_steps) < 1 || absl::GetFlag(FLAGS_warmup) < 1) {
    std::fprintf(stderr, "train_bench: --steps and --warmup must be >= 1\n");
    return 2;
  }
  absl::StatusOr<FashionMnist> loaded =
      LoadFashionMnist(absl::GetFlag(FLAGS_data_dir));
  const bool real = loaded.ok();
  if (!real) {
    std::fprintf(stderr, "train_bench: %s; using random data\n",
                 loaded.status().ToString().c_str());
  }
  const FashionMnist data = real ? *std::move(loaded) : SyntheticData();
  const Mode modes[] = {{"resident", true, true},
                        {"scheduler", false, true},
                        {"on-demand", false, false}};
  std::vector<ModeResult> results;
  for (const Mode& mode : modes) {
    std::fprintf(stderr, "train_bench: %s ...\n", mode.name);
    absl::StatusOr<ModeResult> r = RunMode(mode, data);
    if (!r.ok()) {
      std::fprintf(stderr, "train_bench: %s: %s\n", mode.name,
                   r.status().ToString().c_str());
      return 1;
    }
    results.push_back(*std::move(r));
  }
  const double base = results[0].step_ms;
  const int64_t steps =
      absl::GetFlag(FLAGS_warmup) + absl::GetFlag(FLAGS_steps);
  bool identical = true;
  for (const ModeResult& r : results)
    identical &= r.losses == results[0].losses;
  absl::PrintF(
      "train_bench: width %d depth %d batch %d, %d timed steps, %s "
      "data, device %s\n",
      absl::GetFlag(FLAGS_width), absl::GetFlag(FLAGS_depth),
      absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_steps),
      real ? "Fashion-MNIST" : "random", results[1].stats.device_backend);
  absl::PrintF("%-10s %9s %9s %10s %10s %10s %8s %8s\n", "mode", "step_ms",
               "ratio", "h2d_GB/st", "nvme_r/st", "nvme_w/st", "hit",
               "stall_s");
  nlohmann::json json = nlohmann::json::array();
  for (const ModeResult& r : results) {
    const auto per_step = [&](Link l) {
      return r.stats.links[int(l)].bytes / 1e9 / steps;
    };
    absl::PrintF("%-10s %9.1f %9.3f %10.3f %10.3f %10.3f %8.3f %8.2f\n", r.name,
                 r.step_ms, r.step_ms / base, per_step(Link::kH2D),
                 per_step(Link::kNvmeRead), per_step(Link::kNvmeWrite),
                 r.hit_rate, r.stats.stall_seconds);
    json.push_back(
        {{"mode", r.name},
         {"step_ms_median", r.step_ms},
         {"ratio_vs_resident", r.step_ms / base},
         {"h2d_bytes", r.stats.links[int(Link::kH2D)].bytes},
         {"d2h_bytes", r.stats.links[int(Link::kD2H)].bytes},
         {"nvme_read_bytes", r.stats.links[int(Link::kNvmeRead)].bytes},
         {"nvme_write_bytes", r.stats.links[int(Link::kNvmeWrite)].bytes},
         {"prefetch_hit_rate", r.hit_rate},
         {"stall_seconds", r.stats.stall_seconds}});
  }
  absl::PrintF("losses bitwise identical across modes: %s\n",
               identical ? "yes" : "NO");
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path) << nlohmann::json{{"modes", json},
                                          {"losses_identical", identical}}
                               .dump(2)
                        << "\n";
  }
  return identical ? 0 : 1;
}

}  // namespace
}  // namespace strata::train

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "step time of one short training run resident, offloaded with the "
      "scheduler, and offloaded with prefetch off; prints the ratios to the "
      "resident run and checks the losses are bitwise identical.");
  absl::ParseCommandLine(argc, argv);
  return strata::train::Main();
}
