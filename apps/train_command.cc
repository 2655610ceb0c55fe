// train_command.cc: `strata train` (see train_command.h): flags, the run, the
// progress line and the report.
#include "apps/train_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/checkpoint_command.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/gnuplot.h"
#include "apps/cli/output_path.h"
#include "apps/cli/precision_flags.h"
#include "apps/cli/store_flags.h"
#include "apps/cli/train_defaults.h"
#include "apps/cli/train_plot.h"
#include "apps/distributed_run.h"
#include "apps/failed_run.h"
#include "apps/gpt_train_command.h"
#include "apps/stats_json.h"
#include "apps/train_flags.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "strata/store.h"
#include "train/compute/compute.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/data/dataset.h"
#include "train/model/activation_checkpointing.h"
#include "train/model/footprint.h"
#include "train/model/lease_group.h"
#include "train/model/model.h"
#include "train/run/metrics.h"
#include "train/run/setup.h"
#include "train/run/train_checkpoint.h"
#include "train/run/trainer.h"

ABSL_FLAG(std::string, model, "gpt",
          "gpt (a GPT-2 style transformer on the King James Bible; flags "
          "--layers, --heads, --embed, --context, --tokenizer, ...) or mlp "
          "(a deep MLP on Fashion-MNIST; flags --width, --depth, ...).");
ABSL_FLAG(int64_t, width, 1024, "Units per hidden layer.");
ABSL_FLAG(int32_t, depth, 5,
          "Hidden layers (the model has depth + 1 Linear "
          "layers: 784 -> width x depth -> 10).");
ABSL_FLAG(int64_t, batch, 256,
          "Samples per micro-batch, so per step unless --accumulate (gpt: "
          "sequences of --context tokens).");
ABSL_FLAG(int32_t, accumulate, 1,
          "Micro-batches of --batch samples (gpt: sequences) per optimizer "
          "step (gradient accumulation), run layer-major: each weight "
          "crosses the device link once per step however many micro-batches "
          "there are.");
ABSL_FLAG(std::string, checkpoint, "none",
          "Activation checkpointing: none (keep every activation for "
          "backward), block (keep each layer's input, a GPT block's "
          "residual stream, and recompute the rest in backward; the same "
          "losses, bit for bit) or offload (block, and the kept inputs move "
          "to the host tier after forward; not with --resident).");
ABSL_FLAG(int32_t, epochs, 5, "Passes over the 60000 images.");
ABSL_FLAG(int64_t, max_steps, 0,
          "Stop after this many steps in all (then evaluate); 0 = no limit "
          "(gpt: the run's length, >= 1).");
ABSL_FLAG(double, lr, 1e-3, "Adam's peak learning rate (see --lr-schedule).");
ABSL_FLAG(std::string, lr_schedule, "cosine",
          "cosine (decay over the run: to 0 for the MLP, to a tenth of "
          "--lr for the GPT) or constant.");
ABSL_FLAG(uint64_t, seed, 1,
          "Seed of the initial weights and the batch order; "
          "the same seed gives the same losses, bit for bit, whatever the "
          "budgets (gpt: for the same classifier slice, which the device "
          "budget sets; see classifier_rows in the report).");
ABSL_FLAG(std::string, activation, "relu", "relu or gelu.");
ABSL_FLAG(std::string, optimizer_tier, "host",
          "Where Adam runs: host (CPU Adam on the host tier, "
          "as ZeRO-Offload) or device.");
ABSL_FLAG(std::string, data_dir, strata::train::kFashionMnistDir,
          "Directory with the Fashion-MNIST IDX files "
          "(train-images-idx3-ubyte.gz, ...; Debian package "
          "dataset-fashion-mnist).");
ABSL_FLAG(bool, resident, false,
          "Size the device budget to hold every tensor and "
          "run Adam there, so nothing moves but the input batches "
          "(overrides the budget flags and --optimizer-tier); the baseline "
          "an offloaded run must match bit for bit. Not with "
          "--memory=unified.");

namespace strata {

namespace {

absl::StatusOr<train::TrainOptions> TrainOptionsFromFlags() {
  train::TrainOptions o;
  train::ModelConfig& m = o.model;
  m.width = absl::GetFlag(FLAGS_width);
  m.depth = absl::GetFlag(FLAGS_depth);
  m.batch = absl::GetFlag(FLAGS_batch);
  m.accumulate = absl::GetFlag(FLAGS_accumulate);
  STRATA_ASSIGN_OR_RETURN(m.checkpoint, train::ParseActivationCheckpointing(
                                            absl::GetFlag(FLAGS_checkpoint)));
  STRATA_RETURN_IF_ERROR(PrecisionFromFlags(m));
  m.seed = absl::GetFlag(FLAGS_seed);
  o.shuffle_seed = m.seed;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(lr >= 1e-30 && lr < 1)) {  // a normal float, below 1
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be in [1e-30, 1)", lr));
  }
  m.adam.lr = static_cast<float>(lr);
  if (o.epochs < 1 || o.max_steps < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--epochs=%d --max-steps=%d: need epochs >= 1 and max-steps >= 0",
        o.epochs, o.max_steps));
  }
  const std::string schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (schedule != "cosine" && schedule != "constant") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr-schedule=%s: use cosine or constant", schedule));
  }
  o.cosine_schedule = schedule == "cosine";
  const std::string act = absl::GetFlag(FLAGS_activation);
  if (act == "relu") {
    m.activation = train::Activation::kRelu;
  } else if (act == "gelu") {
    m.activation = train::Activation::kGelu;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--activation=%s: use relu or gelu", act));
  }
  const std::string opt = absl::GetFlag(FLAGS_optimizer_tier);
  if (opt == "host") {
    m.optimizer_tier = Tier::kHost;
  } else if (opt == "device") {
    m.optimizer_tier = Tier::kDevice;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--optimizer-tier=%s: use host or device", opt));
  }
  return o;
}

// "[#########.........]" for a fraction in [0, 1].
std::string Bar(double fraction, int width = 24) {
  const int filled = std::clamp(static_cast<int>(fraction * width), 0, width);
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') +
         "]";
}

// The progress line: redrawn in place on a terminal, every quarter epoch
// otherwise (logs stay short).
class ProgressLine {
 public:
  explicit ProgressLine(bool shown)
      : shown_(shown), tty_(isatty(STDERR_FILENO) == 1) {}
  void Update(const train::Progress& p) {
    if (!shown_) return;
    const int64_t quarter = std::max<int64_t>(1, p.steps_per_epoch / 4);
    if (!tty_ && p.step_in_epoch % quarter != 0 &&
        p.step_in_epoch != p.steps_per_epoch) {
      return;
    }
    std::fprintf(stderr, "%sepoch %d/%d %s %lld/%lld  loss %.4f  %.1f s%s",
                 tty_ ? "\r" : "", p.epoch, p.epochs,
                 Bar(double(p.step_in_epoch) / p.steps_per_epoch).c_str(),
                 static_cast<long long>(p.step_in_epoch),
                 static_cast<long long>(p.steps_per_epoch), p.loss, p.seconds,
                 tty_ ? "\x1b[K" : "\n");
    std::fflush(stderr);
  }
  void Clear() {
    if (shown_ && tty_) std::fputs("\r\x1b[K", stderr);
  }

 private:
  bool shown_;  // false on ranks other than 0
  bool tty_;
};

nlohmann::json ReportJson(const train::TrainOptions& t, const StoreOptions& s,
                          const train::ModelFootprint& f,
                          const train::TrainResult& r, const Stats& st,
                          const std::string& compute) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const train::EpochSummary& e : r.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"steps", e.steps},
                      {"mean_loss", e.mean_loss},
                      {"test_accuracy", e.test_accuracy},
                      {"test_loss", e.test_loss},
                      {"seconds", e.seconds},
                      {"steps_per_second", e.steps_per_second}});
  }
  nlohmann::json report = {
      {"model", "mlp"},
      {"test_accuracy", r.test_accuracy},
      {"final_loss", r.final_loss},
      {"model_state_bytes", f.state_bytes()},
      {"activation_bytes", f.activation_bytes},
      {"step_seconds_median", train::Median(r.step_seconds)},
      {"optimizer_seconds_per_step", train::Median(r.optimizer_seconds)},
      {"adam_vector_path", train::VectorPathName(train::ChosenVectorPath())},
      {"adam_threads", train::HostPool::Shared().threads()},
      {"steps", r.losses.size()},
      {"train_seconds", r.train_seconds},
      {"eval_seconds", r.eval_seconds},
      {"compute", compute},
      {"config", EffectiveConfig(*FindCommand("train"))},
      {"resolved",
       {{"width", t.model.width},
        {"depth", t.model.depth},
        {"batch", t.model.batch},
        {"accumulate", t.model.accumulate},
        {"checkpoint", train::ActivationCheckpointingName(t.model.checkpoint)},
        {"precision", train::PrecisionName(t.model.precision)},
        {"rounding", train::RoundingName(t.model.rounding)},
        {"epochs", t.epochs},
        {"max_steps", t.max_steps},
        {"lr", absl::GetFlag(FLAGS_lr)},
        {"lr_schedule", t.cosine_schedule ? "cosine" : "constant"},
        {"seed", t.model.seed},
        {"activation",
         t.model.activation == train::Activation::kRelu ? "relu" : "gelu"},
        {"optimizer_tier", TierName(t.model.optimizer_tier)},
        {"home_tier", TierName(t.model.home)},
        {"prefetch", s.scheduler.prefetch},
        {"eviction", EvictionPolicyName(s.scheduler.eviction)}}},
      {"epochs", epochs},
      {"losses", r.losses},
  };
  report.update(StoreReportJson(st));
  return report;
}

// What gradient accumulation and activation checkpointing did: the modes,
// peak activation bytes, recompute time, bytes per parameter and step.
nlohmann::json TrainingModesJson(const train::Mlp& model,
                                 const train::TrainOptions& t,
                                 const train::TrainResult& r) {
  nlohmann::json j = {
      {"accumulate", t.model.accumulate},
      {"checkpoint", train::ActivationCheckpointingName(t.model.checkpoint)},
      {"peak_activation_bytes", model.peak_activation_bytes()},
      {"recompute_seconds", model.recompute_seconds()},
  };
  j.update(PrecisionJson(t.model.precision, t.model.rounding,
                         model.skipped_steps(), model.loss_scale()));
  j.update(BytesPerParamStepJson(model.train_link_bytes(),
                                 static_cast<int64_t>(r.losses.size()),
                                 model.parameters()));
  return j;
}

void PrintTable(const train::ModelFootprint& f, const train::TrainResult& r,
                const Stats& st, const train::Mlp& model,
                const train::TrainOptions& t) {
  absl::PrintF("\n%-22s %s\n", "result", "value");
  absl::PrintF("%-22s %.4f\n", "test accuracy", r.test_accuracy);
  absl::PrintF("%-22s %.4f\n", "final loss", r.final_loss);
  PrintStoreRows(st, f.state_bytes());
  PrintNvmeFloorRow(st, model.train_link_bytes(),
                    static_cast<int64_t>(r.losses.size()));
  absl::PrintF("%-22s %.1f ms (%zu steps, %.1f s training)\n", "step median",
               train::Median(r.step_seconds) * 1e3, r.losses.size(),
               r.train_seconds);
  const double step = train::Median(r.step_seconds);
  const double adam = train::Median(r.optimizer_seconds);
  absl::PrintF("%-22s %.2f ms per step (median, %.1f%% of the step; %s, %s)\n",
               "optimizer (Adam)", adam * 1e3,
               step > 0 ? 100 * adam / step : 0.0,
               train::VectorPathName(train::ChosenVectorPath()),
               ThreadsFormat(train::HostPool::Shared().threads()));
  absl::PrintF(
      "%-22s %s peak (--checkpoint=%s, %.2f s recomputing; "
      "--accumulate=%d)\n",
      "activations", FormatByteSize(model.peak_activation_bytes()),
      train::ActivationCheckpointingName(t.model.checkpoint),
      model.recompute_seconds(), t.model.accumulate);
  PrintPrecisionRow(t.model.precision, t.model.rounding, model.skipped_steps(),
                    model.loss_scale());
}

// The plot of the run: loss per step, test loss per epoch, bytes per step.
TrainPlotData PlotData(const train::TrainOptions& t,
                       const train::TrainResult& r,
                       const LinkBytesPerStep& moved) {
  TrainPlotData d{
      .title = absl::StrFormat("strata train: MLP 784 -> %d x %d "
                               "-> 10, batch %d",
                               t.model.width, t.model.depth, t.model.batch),
      .losses = r.losses,
      .eval_name = "test loss",
      .link_bytes = moved.bytes()};
  int64_t step = 0;
  for (const train::EpochSummary& e : r.epochs) {
    step += e.steps;
    d.evals.push_back({step, e.test_loss});
  }
  return d;
}

// Prints the error; exit code 2 for bad input (flags, sizes), 1 otherwise.
// A tier that fills up mid-run gets the flags that fix it.
// `rank_own`: an error of this rank's own files (its checkpoint directory),
// which rank 0 may not meet: printed at once, not left to rank 0.
int Fail(const absl::Status& status, bool before_run = false,
         bool rank_own = false) {
  if (before_run && !rank_own) DistributedRun::AwaitRankZeroRefusal(status);
  std::string hint;
  if (status.code() == absl::StatusCode::kResourceExhausted &&
      status.message().find("raise --") == absl::string_view::npos &&
      status.message().find("lower --") == absl::string_view::npos &&
      status.message().find("memory=copies") == absl::string_view::npos) {
    hint =
        "\n(the budgets are too tight for this model at this batch size: raise "
        "--device-budget / --host-budget / --nvme-budget, or lower "
        "--width/--batch)";
  }
  std::fprintf(stderr, "strata train: %s%s\n", ErrorText(status).c_str(),
               hint.c_str());
  if (before_run) return ExitCodeBeforeRun(status);
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput
                                                             : kExitFailure;
}

// An error before training began: bad input unless the machine's.
int FailBeforeRun(const absl::Status& status) {
  return Fail(status, /*before_run=*/true);
}

// An output refused before the run: bad input, exit code 2.
int Refuse(const absl::Status& status) {
  DistributedRun::AwaitRankZeroRefusal(status);
  std::fprintf(stderr, "strata train: %s\n", ErrorText(status).c_str());
  return 2;
}

}  // namespace

void ApplyTrainDefaults() {
  SetBudgetDefaults(kTrainDeviceBudget, kTrainHostBudget, kTrainNvmeBudget);
}

int RunTrain(const std::string& json_out, const std::string& timeline_out,
             const std::string& plot_out) {
  std::string json_path = json_out, timeline_path = timeline_out,
              plot_path = plot_out;
  if (absl::Status d = DistributedRun::CheckFlags(); !d.ok()) {
    return Refuse(d);
  }
  if (DistributedRun::Requested()) {
    // Rank 0 writes the files.
    if (DistributedRun::LaunchRank() > 0) {
      json_path.clear();
      timeline_path.clear();
      plot_path.clear();
    }
  }
  const std::string model_name = absl::GetFlag(FLAGS_model);
  if (model_name == "gpt") {
    return RunGptTrain(json_path, timeline_path, plot_path);
  }
  if (model_name != "mlp") {
    DistributedRun::AwaitRankZeroRefusal(absl::InvalidArgumentError("--model"));
    std::fprintf(stderr, "strata train: --model=%s: use gpt or mlp\n",
                 model_name.c_str());
    return 2;
  }
  // The GPT's own flags, given to an MLP run, are named, not silently
  // ignored (as --model=gpt names the MLP's).
  for (const FlagEntry& f : FindCommand("train")->flags) {
    if (f.scope == ModelScope::kGpt && FlagGiven(f.name) &&
        !DistributedRun::EchoesRankZero()) {
      std::fprintf(stderr,
                   "strata train: --%s is the GPT's; --model=mlp ignores it\n",
                   Dashed(f.name).c_str());
    }
  }
  absl::StatusOr<train::TrainOptions> topt = TrainOptionsFromFlags();
  absl::StatusOr<StoreOptions> sopt = StoreOptionsFromFlags();
  // Checked alone first: a refusal every rank meets alike prints once.
  if (absl::Status c = RunCheckpoints::CheckFlagValues(); !c.ok()) {
    return Refuse(c);
  }
  if (!topt.ok() || !sopt.ok()) {
    return Refuse(topt.ok() ? sopt.status() : topt.status());
  }
  train::TrainOptions& t = *topt;
  // A bad shape (--width=0) is refused with the flags, before MPI starts.
  if (absl::Status shape = train::ComputeFootprint(t.model).status();
      !shape.ok()) {
    return Refuse(shape);
  }
  StoreOptions& s = *sopt;
  s.timeline = !timeline_path.empty();
  // Fail before a long run, not after it.
  for (const auto& [path, flag] : {std::pair{json_path, "--json"},
                                   std::pair{timeline_path, "--timeline"}}) {
    if (absl::Status w = CheckWritable(path, flag); !w.ok()) return Refuse(w);
  }
  if (absl::Status d = CheckDistinctFiles(
          {{json_path, "--json"},
           {timeline_path, "--timeline"},
           {plot_path, "--plot"}},
          {{absl::GetFlag(FLAGS_config), "--config"},
           {absl::GetFlag(FLAGS_machine_profile), "--machine-profile"}});
      !d.ok()) {
    return Refuse(d);
  }
  if (absl::Status p = CheckPlotOutput(plot_path, "--plot"); !p.ok()) {
    return Refuse(p);
  }
  // After the refusals of the flags: a refused run leaves no --save-dir
  // created or locked.
  absl::StatusOr<RunCheckpoints> checkpoints = RunCheckpoints::FromFlags(
      DistributedRun::Requested() ? DistributedRun::RankDirName() : "");
  if (!checkpoints.ok()) {
    return Fail(checkpoints.status(), /*before_run=*/true, /*rank_own=*/true);
  }
  if (absl::GetFlag(FLAGS_resident)) {
    if (absl::Status st = train::MakeResident(t, s); !st.ok())
      return FailBeforeRun(st);
    absl::PrintF(
        "strata train: --resident: device budget %s, host budget %s, no NVMe "
        "tier (the budget flags are overridden)\n",
        FormatByteSize(s.device.budget_bytes),
        FormatByteSize(s.host.budget_bytes));
  }
  // --distributed: from here on, a rank's error ends every rank (End).
  std::optional<DistributedRun> dist;
  if (DistributedRun::Requested()) {
    absl::StatusOr<DistributedRun> started = DistributedRun::Start();
    if (!started.ok()) return FailBeforeRun(started.status());
    dist.emplace(std::move(*started));
  }
  auto end = [&](int code) {
    if (code != 0 && dist) dist->Abort(code);
    return code;
  };
  const int blas_threads = dist ? dist->ShareCores() : 0;
  if (dist) {
    if (absl::Status same = dist->CheckSameRun(
            EffectiveConfig(*FindCommand("train")), blas_threads);
        !same.ok()) {
      return end(FailBeforeRun(same));
    }
    if (absl::Status agreed = dist->AgreeOnResume(*checkpoints); !agreed.ok()) {
      return end(FailBeforeRun(agreed));
    }
  }
  const int ranks = dist ? dist->ranks() : 1;
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  absl::StatusOr<train::FashionMnist> data = train::LoadFashionMnist(data_dir);
  if (!data.ok()) return end(FailBeforeRun(data.status()));
  // Before the budgets: a step larger than the data set is the error to
  // name, not the bytes its micro-batches would take.
  if (t.model.batch * t.model.accumulate * ranks > data->train.count) {
    return end(FailBeforeRun(absl::InvalidArgumentError(absl::StrFormat(
        "--batch=%d x --accumulate=%d%s is larger than the %d training "
        "images",
        t.model.batch, t.model.accumulate,
        dist ? absl::StrFormat(" x %d ranks", ranks) : "",
        data->train.count))));
  }
  if (dist) s.device.cuda_device = DistributedRun::CudaDevice();
  absl::StatusOr<std::unique_ptr<train::TrainSetup>> setup =
      train::OpenTrainSetup(s, t, dist ? dist->collectives() : nullptr,
                            blas_threads);
  if (!setup.ok()) return end(FailBeforeRun(setup.status()));
  if (dist && (*setup)->gpu_collectives) dist->set_model_transport("nccl");
  Store* store = (*setup)->store.get();
  train::Compute* compute = (*setup)->compute.get();
  train::Mlp* model = (*setup)->model.get();
  const train::ModelFootprint& f = model->footprint();
  const Stats st0 = store->GetStats();
  absl::PrintF(
      "strata train: MLP 784 -> %lld x %d -> 10 (%s), %s of model state "
      "(%s the device budget %s), host budget %s, NVMe budget %s; home "
      "tier %s, Adam on %s%s; %s (%s) with %s\n",
      static_cast<long long>(t.model.width), t.model.depth,
      t.model.activation == train::Activation::kRelu ? "relu" : "gelu",
      FormatByteSize(f.state_bytes()),
      TimesFormat(double(f.state_bytes()) / st0.tiers[0].capacity_bytes),
      FormatByteSize(st0.tiers[0].capacity_bytes),
      FormatByteSize(st0.tiers[1].capacity_bytes),
      FormatByteSize(st0.tiers[2].capacity_bytes), TierName(t.model.home),
      TierName(t.model.optimizer_tier),
      model->streams_optimizer()
          ? " (streamed in 4 MiB parts: the host budget is below one "
            "layer's whole update)"
          : "",
      st0.device_backend, st0.device_memory, compute->name());
  if (dist) {
    absl::PrintF(
        "strata train: --distributed: %s over %s, %s of the parameters, "
        "gradients and Adam states (the state above is one rank's) and "
        "training %d (--batch x --accumulate) of every step's %d samples\n",
        ranks == 1 ? "1 rank" : absl::StrFormat("%d ranks", ranks),
        dist->model_transport(),
        ranks == 1 ? "holding all"
                   : absl::StrFormat("each holding 1/%d", ranks),
        t.model.batch * t.model.accumulate,
        t.model.batch * t.model.accumulate * ranks);
  }
  std::fflush(stdout);
  if (!checkpoints->resume_path().empty()) {
    absl::StatusOr<train::Resumed> resumed =
        train::ResumeMlp(checkpoints->resume_path(), *store, *model, t);
    if (!resumed.ok()) return end(FailBeforeRun(resumed.status()));
    checkpoints->Resumed(*resumed);
  }
  t.after_step = [&](const train::StepDone& done) {
    return checkpoints->AfterStep(*store, done.step, done.total_steps, [&] {
      return train::MlpCheckpoint(*model, t, done);
    });
  };
  ProgressLine progress(!dist || dist->rank() == 0);  // printed once
  LinkBytesPerStep moved(st0);
  std::vector<double> losses;  // for the report of a run that fails
  absl::StatusOr<train::TrainResult> result = train::Train(
      *model, data->train, data->test, t,
      [&](const train::Progress& p) {
        losses.push_back(p.loss);
        progress.Update(p);
        if (!plot_path.empty()) moved.Record(store->GetStats());
      },
      [&](const train::EpochSummary& e) {
        progress.Clear();
        // A run that stopped inside the epoch says how much of it the loss
        // covers (a resumed run's steps before the resume too).
        const std::string part =
            e.steps_done < e.steps_per_epoch
                ? absl::StrFormat(" (%d of its %d steps)", e.steps_done,
                                  e.steps_per_epoch)
                : "";
        std::printf(
            "epoch %d%s: loss %.4f  test accuracy %.4f  %.2f steps/s  %.1f "
            "s\n",
            e.epoch, part.c_str(), e.mean_loss, e.test_accuracy,
            e.steps_per_second, e.seconds);
        std::fflush(stdout);
      });
  progress.Clear();
  if (!result.ok()) {
    const int code = Fail(result.status());
    ReportFailedRun(result.status(), json_path, store->GetStats(), losses,
                    *checkpoints,
                    {{"config", EffectiveConfig(*FindCommand("train"))}});
    return end(code);
  }
  const Stats st = store->GetStats();
  PrintTable(f, *result, st, *model, t);
  nlohmann::json ranks_json;
  if (dist) {
    absl::StatusOr<nlohmann::json> j =
        dist->ReportJson(st, model->train_bytes_sent(),
                         static_cast<int64_t>(result->losses.size()));
    if (!j.ok()) return end(Fail(j.status()));
    ranks_json = std::move(*j);
    DistributedRun::PrintRanks(ranks_json);
  }
  if (!json_path.empty()) {
    nlohmann::json report = ReportJson(t, s, f, *result, st, compute->name());
    report.update(TrainingModesJson(*model, t, *result));
    report.update(checkpoints->ReportJson());
    report["optimizer_streamed"] = model->streams_optimizer();
    if (dist) report["distributed"] = ranks_json;
    if (absl::Status w = WriteReportJson(json_path, report); !w.ok()) {
      return Fail(w);
    }
  }
  if (!timeline_path.empty()) {
    if (absl::Status w = store->WriteTimeline(timeline_path); !w.ok()) {
      return Fail(w);
    }
  }
  if (!plot_path.empty()) {
    if (absl::Status p = PlotTraining(PlotData(t, *result, moved), plot_path);
        !p.ok()) {
      return Fail(p);
    }
    absl::PrintF("plot written to %s\n", plot_path);
  }
  return 0;
}

}  // namespace strata
