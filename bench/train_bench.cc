// train_bench: the same short training run three ways in one invocation —
// resident (every tensor on the device, nothing moves), offloaded with the
// scheduler (prefetch + Belady eviction), and offloaded with prefetch off
// (on-demand loads) — and their step-time ratios against the resident run.
// The losses of all three must be bitwise equal; the bench says whether they
// are. --model=mlp (Fashion-MNIST) or gpt (random byte tokens: step times do
// not depend on the text). The MLP then runs offloaded with the scheduler
// for each precision (fp32, bf16, fp16) x activation checkpointing (none,
// block, offload), and with --accumulate=4 (fp32, bf16), and prints bytes
// per parameter and step on each link, step time and peak activations, with
// the byte targets as ratios measured in the same run. Each mode
// also reports its bounds: io_bound (the step's NVMe bytes at the bandwidth
// measured in the run) and cpu_bound (the process's CPU seconds per step,
// every thread, over the cores it may use): on a machine without a GPU the
// simulated device's copies, the checksums and the I/O completions share
// the cores with the compute, so a step cannot beat it.
//
//   build/default/bench/train_bench [--model=gpt] [--steps=40] [--json=FILE]
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
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
#include "base/splitmix64.h"
#include "bench/train_bench_report.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "strata/store.h"
#include "tiers/nvme/nvme_measure.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/precision.h"
#include "train/data/dataset.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/model.h"
#include "train/run/gpt_setup.h"
#include "train/run/metrics.h"
#include "train/run/setup.h"
#include "train/run/trainer.h"

ABSL_FLAG(std::string, model, "mlp", "mlp or gpt.");
ABSL_FLAG(int64_t, steps, 40, "Timed training steps per mode.");
ABSL_FLAG(int64_t, warmup, 5,
          "Untimed steps first (the scheduler learns the order in step 1).");
ABSL_FLAG(int64_t, width, 1024, "Units per hidden layer.");
ABSL_FLAG(int32_t, depth, 5, "Hidden layers.");
ABSL_FLAG(int64_t, batch, 256, "Samples per step.");
ABSL_FLAG(int32_t, layers, 8, "gpt: transformer blocks.");
ABSL_FLAG(int64_t, embed, 128, "gpt: embedding width.");
ABSL_FLAG(int32_t, heads, 4, "gpt: attention heads.");
ABSL_FLAG(int64_t, context, 128, "gpt: tokens per sequence.");
ABSL_FLAG(int64_t, gpt_batch, 2, "gpt: sequences per step.");
ABSL_FLAG(int64_t, vocab, 4096, "gpt: vocabulary (random tokens below it).");
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
ABSL_FLAG(std::string, timeline, "",
          "Write the scheduler mode's timeline here (Chrome trace-event JSON: "
          "each transfer, stall and lease, and the plan's transfers as "
          "issued, for Perfetto).");
ABSL_FLAG(int64_t, matrix_steps, 10,
          "Timed steps of each precision x checkpoint run (offloaded, with "
          "the scheduler; then fp32 and bf16 with --accumulate=4, the GPT's "
          "2 when --gpt_batch is not a multiple of 4) after the mode table; "
          "0 skips it.");

namespace strata::train {
namespace {

struct Mode {
  const char* name;
  bool resident;
  bool prefetch;
  bool planned = true;  // SchedulerOptions::planned
};

// User + system CPU seconds of the whole process so far.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// The timed steps' window: Mark() after the warm-up steps and after the
// last one; the process's CPU time and the store's link counters between.
class TimedWindow {
 public:
  explicit TimedWindow(const Store& store) : store_(store) {}
  void Mark() {
    cpu_.push_back(ProcessCpuSeconds());
    links_.push_back(store_.GetStats().links);
  }
  double CpuPerStep(int64_t timed_steps) const {
    if (cpu_.size() < 2 || timed_steps <= 0) return 0;
    return (cpu_.back() - cpu_.front()) / static_cast<double>(timed_steps);
  }
  // Each link's bytes and transfers over the window.
  std::array<LinkStats, kNumLinks> Links() const {
    std::array<LinkStats, kNumLinks> d{};
    if (links_.size() < 2) return d;
    for (int l = 0; l < kNumLinks; ++l) {
      d[l].bytes = links_.back()[l].bytes - links_.front()[l].bytes;
      d[l].transfers = links_.back()[l].transfers - links_.front()[l].transfers;
    }
    return d;
  }

 private:
  const Store& store_;
  std::vector<double> cpu_;
  std::vector<std::array<LinkStats, kNumLinks>> links_;
};

// The NVMe tier's sequential bandwidth here, measured in this run as
// `strata bench -t nvme` does (the store's path, its block size and queue
// depth), for the I/O bound. A failure leaves the bound out, not the run.

LinkRates MeasureNvmeRates() {
  // `strata bench -t nvme`'s defaults: 1 MiB blocks at queue depth 32,
  // the median of 3 passes.
  NvmeMeasureConfig config;
  config.nvme.directories = {absl::GetFlag(FLAGS_nvme_dir)};
  config.nvme.block_size_bytes = 1 * kMiB;
  config.nvme.queue_depth = 32;
  config.bytes = 64 * kMiB;
  config.samples = 3;
  absl::StatusOr<NvmeMeasurement> r = MeasureNvme(config);
  if (!r.ok()) {
    std::fprintf(stderr, "train_bench: NVMe bandwidth not measured: %s\n",
                 r.status().ToString().c_str());
    return {};
  }
  return {r->read_gbps, r->write_gbps};
}

// --timeline records the mode table's scheduler run.
bool TimelineWanted(const Mode& mode) {
  return !absl::GetFlag(FLAGS_timeline).empty() && !mode.resident &&
         mode.prefetch && mode.planned;
}

absl::StatusOr<StoreOptions> ModeStoreOptions(const Mode& mode) {
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
  s.scheduler.planned = mode.planned;
  s.timeline = TimelineWanted(mode);
  return s;
}

// The median of the steps after --warmup, the losses and the store's stats.
absl::StatusOr<ModeResult> Summarize(const Mode& mode,
                                     const std::vector<double>& step_seconds,
                                     const std::vector<double>& losses,
                                     const Store& store,
                                     const TimedWindow& window) {
  const auto warmup = static_cast<size_t>(absl::GetFlag(FLAGS_warmup));
  if (step_seconds.size() <= warmup) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the run took %d steps, not more than --warmup=%d (one epoch at this "
        "--batch is that short); lower --warmup or --batch",
        step_seconds.size(), warmup));
  }
  if (TimelineWanted(mode)) {
    STRATA_RETURN_IF_ERROR(store.WriteTimeline(absl::GetFlag(FLAGS_timeline)));
  }
  ModeResult m{.name = mode.name, .losses = losses};
  const std::vector<double> timed(step_seconds.begin() + warmup,
                                  step_seconds.end());
  m.step_ms = Median(timed) * 1e3;
  for (double s : step_seconds) m.train_seconds += s;
  m.stats = store.GetStats();
  m.hit_rate = PrefetchHitRate(m.stats);
  m.timed_steps = static_cast<int64_t>(timed.size());
  m.cpu_seconds_per_step = window.CpuPerStep(m.timed_steps);
  m.timed_links = window.Links();
  return m;
}

// The GPT of the flags, its classifier sliced for the offloaded budget in
// every mode (the same sums).
GptConfig BenchGpt(uint64_t device_budget) {
  GptConfig c;
  c.layers = absl::GetFlag(FLAGS_layers);
  c.embed = absl::GetFlag(FLAGS_embed);
  c.heads = absl::GetFlag(FLAGS_heads);
  c.context = absl::GetFlag(FLAGS_context);
  c.batch = absl::GetFlag(FLAGS_gpt_batch);
  c.vocab = absl::GetFlag(FLAGS_vocab);
  c.classifier_rows = ChooseClassifierRows(c, device_budget);
  return c;
}

// --warmup + `timed_steps` steps of random tokens: each step's seconds and
// loss per token.
absl::Status RunGptSteps(Gpt& gpt, int64_t timed_steps,
                         std::vector<double>& seconds,
                         std::vector<double>& losses,
                         TimedWindow* window = nullptr) {
  const GptConfig& c = gpt.config();
  const int64_t sequences = c.step_sequences();
  std::vector<int32_t> tokens(sequences * c.context + 1);
  uint64_t state = 1;
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  for (int64_t step = 0; step < warmup + timed_steps; ++step) {
    if (window != nullptr && step == warmup) window->Mark();
    for (int32_t& t : tokens)
      t = static_cast<int32_t>(SplitMix64Next(state) % c.vocab);
    const auto start = std::chrono::steady_clock::now();
    STRATA_ASSIGN_OR_RETURN(
        double loss,
        gpt.TrainStep(tokens.data(), tokens.data() + 1, sequences));
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    losses.push_back(loss / (tokens.size() - 1));
  }
  if (window != nullptr) window->Mark();
  return absl::OkStatus();
}

absl::StatusOr<ModeResult> RunGptMode(const Mode& mode) {
  STRATA_ASSIGN_OR_RETURN(StoreOptions s, ModeStoreOptions(mode));
  GptConfig c = BenchGpt(s.device.budget_bytes);
  if (mode.resident) STRATA_RETURN_IF_ERROR(MakeGptResident(c, s));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<GptSetup> setup, OpenGptSetup(s, c));
  std::vector<double> seconds, losses;
  TimedWindow window(*setup->store);
  STRATA_RETURN_IF_ERROR(RunGptSteps(*setup->model, absl::GetFlag(FLAGS_steps),
                                     seconds, losses, &window));
  STRATA_ASSIGN_OR_RETURN(ModeResult result, Summarize(mode, seconds, losses,
                                                       *setup->store, window));
  result.rolled_back_steps = setup->model->clip_stats().rolled_back;
  result.deferred_steps = setup->model->clip_stats().deferred;
  return result;
}

// The MLP of the flags, for --warmup + `timed_steps` steps, no evaluation.
TrainOptions BenchJob(int64_t timed_steps) {
  TrainOptions t;
  t.model.width = absl::GetFlag(FLAGS_width);
  t.model.depth = absl::GetFlag(FLAGS_depth);
  t.model.batch = absl::GetFlag(FLAGS_batch);
  t.max_steps = absl::GetFlag(FLAGS_warmup) + timed_steps;
  t.epochs = 1000;  // max_steps ends the run
  t.evaluate = false;
  return t;
}

absl::StatusOr<ModeResult> RunMode(const Mode& mode, const FashionMnist& data) {
  STRATA_ASSIGN_OR_RETURN(StoreOptions s, ModeStoreOptions(mode));
  TrainOptions t = BenchJob(absl::GetFlag(FLAGS_steps));
  if (mode.resident) STRATA_RETURN_IF_ERROR(MakeResident(t, s));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TrainSetup> setup,
                          OpenTrainSetup(s, t));
  TimedWindow window(*setup->store);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup);
  t.after_step = [&window, warmup, last = t.max_steps](const StepDone& done) {
    if (done.step == warmup || done.step == last) window.Mark();
    return absl::OkStatus();
  };
  STRATA_ASSIGN_OR_RETURN(TrainResult r,
                          Train(*setup->model, data.train, data.test, t));
  return Summarize(mode, r.step_seconds, r.losses, *setup->store, window);
}

// One cell of the precision x checkpoint x accumulate table (MLP,
// offloaded, scheduler on).
struct Variant {
  Precision precision = Precision::kFp32;
  ActivationCheckpointing checkpoint = ActivationCheckpointing::kNone;
  int accumulate = 1;  // micro-batches of --batch / accumulate samples
};

struct VariantResult {
  Variant v;
  double step_ms = 0;
  // Bytes per parameter and step on each link (Link order), training only.
  std::array<double, kNumLinks> per_param{};
  uint64_t peak_activation_bytes = 0;
  int64_t skipped_steps = 0;
  double final_loss = 0;
  // Host <-> device bytes per parameter and step.
  double device_link() const {
    return per_param[int(Link::kH2D)] + per_param[int(Link::kD2H)];
  }
};

// A variant's numbers from its model (Mlp or Gpt) after the run.
template <typename Model>
VariantResult Measured(const Variant& v, const Model& m,
                       const std::vector<double>& step_seconds,
                       double final_loss, int64_t parameters) {
  VariantResult out{.v = v,
                    .peak_activation_bytes = m.peak_activation_bytes(),
                    .skipped_steps = m.skipped_steps(),
                    .final_loss = final_loss};
  const auto warmup = static_cast<size_t>(absl::GetFlag(FLAGS_warmup));
  out.step_ms = Median(std::vector<double>(step_seconds.begin() + warmup,
                                           step_seconds.end())) *
                1e3;
  const double units = static_cast<double>(step_seconds.size()) *
                       static_cast<double>(parameters);
  for (int l = 0; l < kNumLinks; ++l) {
    out.per_param[l] = static_cast<double>(m.train_link_bytes()[l]) / units;
  }
  return out;
}

absl::StatusOr<VariantResult> RunVariant(const Variant& v,
                                         const FashionMnist& data) {
  STRATA_ASSIGN_OR_RETURN(StoreOptions s,
                          ModeStoreOptions({"scheduler", false, true}));
  s.timeline = false;  // --timeline is the mode table's run
  TrainOptions t = BenchJob(absl::GetFlag(FLAGS_matrix_steps));
  t.model.batch /= v.accumulate;
  t.model.accumulate = v.accumulate;
  t.model.precision = v.precision;
  t.model.checkpoint = v.checkpoint;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<TrainSetup> setup,
                          OpenTrainSetup(s, t));
  STRATA_ASSIGN_OR_RETURN(TrainResult r,
                          Train(*setup->model, data.train, data.test, t));
  return Measured(v, *setup->model, r.step_seconds, r.final_loss,
                  setup->model->parameters());
}

absl::StatusOr<VariantResult> RunGptVariant(const Variant& v) {
  STRATA_ASSIGN_OR_RETURN(StoreOptions s,
                          ModeStoreOptions({"scheduler", false, true}));
  s.timeline = false;  // --timeline is the mode table's run
  GptConfig c = BenchGpt(s.device.budget_bytes);
  c.precision = v.precision;
  c.checkpoint = v.checkpoint;
  c.batch /= v.accumulate;  // the same sequences a step
  c.accumulate = v.accumulate;
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<GptSetup> setup, OpenGptSetup(s, c));
  std::vector<double> seconds, losses;
  STRATA_RETURN_IF_ERROR(RunGptSteps(
      *setup->model, absl::GetFlag(FLAGS_matrix_steps), seconds, losses));
  return Measured(v, *setup->model, seconds, losses.back(),
                  GptParameterCount(c));
}

// The table: bytes per parameter and step for each precision and
// checkpointing mode, and accumulation; then the byte
// targets, as ratios measured in this run. `gpt` runs the GPT instead.
absl::StatusOr<nlohmann::json> RunMatrix(const FashionMnist& data, bool gpt) {
  using AC = ActivationCheckpointing;
  std::vector<Variant> variants;
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    for (AC c : {AC::kNone, AC::kBlock, AC::kOffload}) {
      variants.push_back({p, c, 1});
    }
  }
  // Micro-batches of a step's samples: 4 (the GPT: 2 when its batch is
  // not a multiple of 4; none when odd).
  const int64_t gpt_batch = absl::GetFlag(FLAGS_gpt_batch);
  const int accumulate = !gpt                 ? 4
                         : gpt_batch % 4 == 0 ? 4
                         : gpt_batch % 2 == 0 ? 2
                                              : 0;
  if (accumulate > 0) {
    variants.push_back({Precision::kFp32, AC::kNone, accumulate});
    variants.push_back({Precision::kBf16, AC::kNone, accumulate});
  }
  std::vector<VariantResult> results;
  for (const Variant& v : variants) {
    std::fprintf(stderr, "train_bench: %s checkpoint=%s accumulate=%d ...\n",
                 PrecisionName(v.precision),
                 ActivationCheckpointingName(v.checkpoint), v.accumulate);
    STRATA_ASSIGN_OR_RETURN(VariantResult r,
                            gpt ? RunGptVariant(v) : RunVariant(v, data));
    results.push_back(r);
  }
  absl::PrintF(
      "\noffloaded with the scheduler, %d timed steps each (bytes per "
      "parameter and step):\n",
      absl::GetFlag(FLAGS_matrix_steps));
  absl::PrintF("%-9s %-10s %5s %9s %8s %8s %8s %8s %10s %7s\n", "precision",
               "checkpoint", "accum", "step_ms", "h2d", "d2h", "nvme_r",
               "nvme_w", "act_MiB", "skipped");
  nlohmann::json rows = nlohmann::json::array();
  for (const VariantResult& r : results) {
    absl::PrintF(
        "%-9s %-10s %5d %9.1f %8.2f %8.2f %8.2f %8.2f %10.1f %7d\n",
        PrecisionName(r.v.precision),
        ActivationCheckpointingName(r.v.checkpoint), r.v.accumulate, r.step_ms,
        r.per_param[int(Link::kH2D)], r.per_param[int(Link::kD2H)],
        r.per_param[int(Link::kNvmeRead)], r.per_param[int(Link::kNvmeWrite)],
        static_cast<double>(r.peak_activation_bytes) / kMiB, r.skipped_steps);
    rows.push_back(
        {{"precision", PrecisionName(r.v.precision)},
         {"checkpoint", ActivationCheckpointingName(r.v.checkpoint)},
         {"accumulate", r.v.accumulate},
         {"step_ms_median", r.step_ms},
         {"h2d_bytes_per_param_step", r.per_param[int(Link::kH2D)]},
         {"d2h_bytes_per_param_step", r.per_param[int(Link::kD2H)]},
         {"nvme_read_bytes_per_param_step", r.per_param[int(Link::kNvmeRead)]},
         {"nvme_write_bytes_per_param_step",
          r.per_param[int(Link::kNvmeWrite)]},
         {"peak_activation_bytes", r.peak_activation_bytes},
         {"skipped_steps", r.skipped_steps},
         {"final_loss", r.final_loss}});
  }
  // results[0]: fp32 none; [3]: bf16 none; [9], [10]: fp32, bf16 x 4.
  const double bf16_ratio = results[3].device_link() / results[0].device_link();
  absl::PrintF("targets: bf16/fp32 host<->device bytes %.3f (<= 0.55: %s)",
               bf16_ratio, bf16_ratio <= 0.55 ? "met" : "NOT met");
  nlohmann::json out = {{"rows", rows},
                        {"bf16_vs_fp32_device_link_bytes", bf16_ratio}};
  if (accumulate > 0) {
    const double accum_ratio = results[9].per_param[int(Link::kH2D)] /
                               results[0].per_param[int(Link::kH2D)];
    absl::PrintF("; accumulate=%d / 1 h2d bytes %.3f (<= 1.1: %s)", accumulate,
                 accum_ratio, accum_ratio <= 1.1 ? "met" : "NOT met");
    out["accumulate_vs_1_h2d_bytes"] = accum_ratio;
    out["accumulate"] = accumulate;
  }
  absl::PrintF("\n");
  return out;
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

// The run's shape, its data and the device, above the table.
void PrintBanner(bool gpt, bool real, const std::string& device) {
  if (gpt) {
    absl::PrintF(
        "train_bench: gpt %d layers embed %d heads %d context %d batch %d, %d "
        "timed steps, random tokens, device %s\n",
        absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_embed),
        absl::GetFlag(FLAGS_heads), absl::GetFlag(FLAGS_context),
        absl::GetFlag(FLAGS_gpt_batch), absl::GetFlag(FLAGS_steps), device);
  } else {
    absl::PrintF(
        "train_bench: width %d depth %d batch %d, %d timed steps, %s "
        "data, device %s\n",
        absl::GetFlag(FLAGS_width), absl::GetFlag(FLAGS_depth),
        absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_steps),
        real ? "Fashion-MNIST" : "random", device);
  }
}

int Main() {
  if (absl::GetFlag(FLAGS_steps) < 1 || absl::GetFlag(FLAGS_warmup) < 1 ||
      absl::GetFlag(FLAGS_matrix_steps) < 0) {
    std::fprintf(stderr,
                 "train_bench: --steps and --warmup must be >= 1, "
                 "--matrix_steps >= 0\n");
    return 2;
  }
  const bool gpt = absl::GetFlag(FLAGS_model) == "gpt";
  if (!gpt && absl::GetFlag(FLAGS_model) != "mlp") {
    std::fprintf(stderr, "train_bench: --model: use mlp or gpt\n");
    return 2;
  }
  absl::StatusOr<FashionMnist> loaded =
      gpt ? absl::NotFoundError("not needed")
          : LoadFashionMnist(absl::GetFlag(FLAGS_data_dir));
  const bool real = loaded.ok();
  if (!real && !gpt) {
    std::fprintf(stderr, "train_bench: %s; using random data\n",
                 loaded.status().ToString().c_str());
  }
  const FashionMnist data = real ? *std::move(loaded) : SyntheticData();
  std::fprintf(stderr, "train_bench: measuring the NVMe bandwidth ...\n");
  const LinkRates rates = MeasureNvmeRates();
  const Mode modes[] = {{"resident", true, true},
                        {"scheduler", false, true},
                        {"reactive", false, true, false},
                        {"on-demand", false, false}};
  std::vector<ModeResult> results;
  for (const Mode& mode : modes) {
    std::fprintf(stderr, "train_bench: %s ...\n", mode.name);
    absl::StatusOr<ModeResult> r = gpt ? RunGptMode(mode) : RunMode(mode, data);
    if (!r.ok()) {
      std::fprintf(stderr, "train_bench: %s: %s\n", mode.name,
                   r.status().ToString().c_str());
      return 1;
    }
    results.push_back(*std::move(r));
  }
  bool identical = true;
  for (const ModeResult& r : results)
    identical &= r.losses == results[0].losses;
  PrintBanner(gpt, real, results[1].stats.device_backend);
  absl::PrintF(
      "NVMe here (measured in this run): read %.2f GB/s, write %.2f "
      "GB/s\n",
      rates.nvme_read_gbps, rates.nvme_write_gbps);
  const nlohmann::json json = PrintModes(results, rates);
  absl::PrintF("losses bitwise identical across modes: %s\n",
               identical ? "yes" : "NO");
  nlohmann::json matrix;
  if (absl::GetFlag(FLAGS_matrix_steps) > 0) {
    absl::StatusOr<nlohmann::json> m = RunMatrix(data, gpt);
    if (!m.ok()) {
      std::fprintf(stderr, "train_bench: %s\n", m.status().ToString().c_str());
      return 1;
    }
    matrix = *std::move(m);
  }
  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    std::ofstream(path)
        << nlohmann::json{{"modes", json},
                          {"nvme_bench_read_gbps", rates.nvme_read_gbps},
                          {"nvme_bench_write_gbps", rates.nvme_write_gbps},
                          {"losses_identical", identical},
                          {"precision_checkpoint_matrix", matrix}}
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
