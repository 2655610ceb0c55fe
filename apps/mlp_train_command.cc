// mlp_train_command.cc: `strata train --model=mlp` (see
// mlp_train_command.h): the run, step by step — flags and outputs checked,
// MPI started, the data loaded, the store and the model opened, training, the
// outputs written (its flags: mlp_train_flags.h; what it prints and writes:
// mlp_train_report.h).
#include "apps/mlp_train_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/checkpoint_command.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/gnuplot.h"
#include "apps/cli/output_path.h"
#include "apps/cli/store_flags.h"
#include "apps/cli/train_plot.h"
#include "apps/distributed_run.h"
#include "apps/failed_run.h"
#include "apps/mlp_train_flags.h"
#include "apps/mlp_train_report.h"
#include "apps/train_flags.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "strata/store.h"
#include "train/compute/compute.h"
#include "train/data/dataset.h"
#include "train/model/footprint.h"
#include "train/model/model.h"
#include "train/run/setup.h"
#include "train/run/train_checkpoint.h"
#include "train/run/trainer.h"

namespace strata {
namespace {

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

// One MLP run, step by step (RunMlpTrain calls them in order): each step
// returns the exit code when the run ends there, std::nullopt to go on. The
// members are declared in the order the steps make them, so they are
// destroyed in reverse: the model and the store before the data set, and
// all of them before MPI ends.
class MlpTrain {
 public:
  MlpTrain(const std::string& json_path, const std::string& timeline_path,
           const std::string& plot_path)
      : json_path_(json_path),
        timeline_path_(timeline_path),
        plot_path_(plot_path) {}

  // The GPT's own flags, given to an MLP run, are named, not silently
  // ignored (as --model=gpt names the MLP's).
  void NameGptFlags() const;
  // The run's and the store's flags, and the model's shape: every refusal
  // of their values alone, before MPI starts.
  std::optional<int> ReadFlags();
  // The output files (writable, distinct from the inputs and each other),
  // then --save-dir and --resume.
  std::optional<int> CheckOutputs();
  // --resident: budgets that hold every tensor on the device.
  std::optional<int> ApplyResident();
  // --distributed: starts MPI; the ranks agree on the run and on the step
  // they resume from.
  std::optional<int> StartDistributed();
  // Loads Fashion-MNIST and refuses a step larger than it.
  std::optional<int> LoadData();
  // Opens the store, the compute and the model, and prints what they are.
  std::optional<int> OpenSetup();
  // The resumed state and the checkpoint saved after each step.
  std::optional<int> PrepareCheckpoints();
  // Trains, printing the progress and each epoch; a run that fails reports
  // what it did.
  std::optional<int> Train();
  // The table, the ranks, then --json, --timeline and --plot. Returns the
  // exit code.
  int WriteOutputs();

 private:
  // Prints the line saying what runs (and, sharded, what each rank holds).
  void PrintBanner() const;
  // --distributed: from StartDistributed on, a rank's error ends every
  // rank.
  int End(int code) const {
    if (code != 0 && dist_) dist_->Abort(code);
    return code;
  }

  const std::string json_path_, timeline_path_, plot_path_;
  train::TrainOptions t_;
  StoreOptions store_options_;
  std::optional<RunCheckpoints> checkpoints_;
  std::optional<DistributedRun> dist_;
  int blas_threads_ = 0;
  int ranks_ = 1;
  std::optional<train::FashionMnist> data_;
  std::unique_ptr<train::TrainSetup> setup_;
  Store* store_ = nullptr;             // setup_'s
  train::Compute* compute_ = nullptr;  // setup_'s
  train::Mlp* model_ = nullptr;        // setup_'s
  Stats st0_;                          // the store's, before training
  std::optional<LinkBytesPerStep> moved_;
  std::optional<train::TrainResult> result_;
};

void MlpTrain::NameGptFlags() const {
  for (const FlagEntry& f : FindCommand("train")->flags) {
    if (f.scope == ModelScope::kGpt && FlagGiven(f.name) &&
        !DistributedRun::EchoesRankZero()) {
      std::fprintf(stderr,
                   "strata train: --%s is the GPT's; --model=mlp ignores it\n",
                   Dashed(f.name).c_str());
    }
  }
}

std::optional<int> MlpTrain::ReadFlags() {
  absl::StatusOr<train::TrainOptions> topt = MlpTrainOptionsFromFlags();
  absl::StatusOr<StoreOptions> sopt = StoreOptionsFromFlags();
  // Checked alone first: a refusal every rank meets alike prints once.
  if (absl::Status c = RunCheckpoints::CheckFlagValues(); !c.ok()) {
    return Refuse(c);
  }
  if (!topt.ok() || !sopt.ok()) {
    return Refuse(topt.ok() ? sopt.status() : topt.status());
  }
  // A bad shape (--width=0) is refused with the flags, before MPI starts.
  if (absl::Status shape = train::ComputeFootprint(topt->model).status();
      !shape.ok()) {
    return Refuse(shape);
  }
  t_ = std::move(*topt);
  store_options_ = std::move(*sopt);
  store_options_.timeline = !timeline_path_.empty();
  return std::nullopt;
}

std::optional<int> MlpTrain::CheckOutputs() {
  // Fail before a long run, not after it.
  if (absl::Status o =
          CheckTrainOutputs(json_path_, timeline_path_, plot_path_, {});
      !o.ok()) {
    return Refuse(o);
  }
  // After the refusals of the flags: a refused run leaves no --save-dir
  // created or locked.
  absl::StatusOr<RunCheckpoints> checkpoints = RunCheckpoints::FromFlags(
      DistributedRun::Requested() ? DistributedRun::RankDirName() : "");
  if (!checkpoints.ok()) {
    return Fail(checkpoints.status(), /*before_run=*/true, /*rank_own=*/true);
  }
  checkpoints_.emplace(std::move(*checkpoints));
  return std::nullopt;
}

std::optional<int> MlpTrain::ApplyResident() {
  if (!absl::GetFlag(FLAGS_resident)) return std::nullopt;
  StoreOptions& s = store_options_;
  if (absl::Status st = train::MakeResident(t_, s); !st.ok())
    return FailBeforeRun(st);
  absl::PrintF(
      "strata train: --resident: device budget %s, host budget %s, no NVMe "
      "tier (the budget flags are overridden)\n",
      FormatByteSize(s.device.budget_bytes),
      FormatByteSize(s.host.budget_bytes));
  return std::nullopt;
}

std::optional<int> MlpTrain::StartDistributed() {
  if (!DistributedRun::Requested()) return std::nullopt;
  absl::StatusOr<DistributedRun> started = DistributedRun::Start();
  if (!started.ok()) return FailBeforeRun(started.status());
  dist_.emplace(std::move(*started));
  blas_threads_ = dist_->ShareCores();
  if (absl::Status same = dist_->CheckSameRun(
          EffectiveConfig(*FindCommand("train")), blas_threads_);
      !same.ok()) {
    return End(FailBeforeRun(same));
  }
  if (absl::Status agreed = dist_->AgreeOnResume(*checkpoints_); !agreed.ok()) {
    return End(FailBeforeRun(agreed));
  }
  return std::nullopt;
}

std::optional<int> MlpTrain::LoadData() {
  ranks_ = dist_ ? dist_->ranks() : 1;
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  absl::StatusOr<train::FashionMnist> data = train::LoadFashionMnist(data_dir);
  if (!data.ok()) return End(FailBeforeRun(data.status()));
  data_.emplace(std::move(*data));
  // Before the budgets: a step larger than the data set is the error to
  // name, not the bytes its micro-batches would take.
  const train::ModelConfig& m = t_.model;
  if (m.batch * m.accumulate * ranks_ > data_->train.count) {
    return End(FailBeforeRun(absl::InvalidArgumentError(absl::StrFormat(
        "--batch=%d x --accumulate=%d%s is larger than the %d training "
        "images",
        m.batch, m.accumulate,
        dist_ ? absl::StrFormat(" x %d ranks", ranks_) : "",
        data_->train.count))));
  }
  return std::nullopt;
}

std::optional<int> MlpTrain::OpenSetup() {
  StoreOptions& s = store_options_;
  if (dist_) s.device.cuda_device = DistributedRun::CudaDevice();
  absl::StatusOr<std::unique_ptr<train::TrainSetup>> setup =
      train::OpenTrainSetup(s, t_, dist_ ? dist_->collectives() : nullptr,
                            blas_threads_);
  if (!setup.ok()) return End(FailBeforeRun(setup.status()));
  setup_ = std::move(*setup);
  if (dist_ && setup_->gpu_collectives) dist_->set_model_transport("nccl");
  store_ = setup_->store.get();
  compute_ = setup_->compute.get();
  model_ = setup_->model.get();
  st0_ = store_->GetStats();
  PrintBanner();
  return std::nullopt;
}

void MlpTrain::PrintBanner() const {
  const train::ModelConfig& m = t_.model;
  const train::ModelFootprint& f = model_->footprint();
  absl::PrintF(
      "strata train: MLP 784 -> %lld x %d -> 10 (%s), %s of model state "
      "(%s the device budget %s), host budget %s, NVMe budget %s; home "
      "tier %s, Adam on %s%s; %s (%s) with %s\n",
      static_cast<long long>(m.width), m.depth,
      m.activation == train::Activation::kRelu ? "relu" : "gelu",
      FormatByteSize(f.state_bytes()),
      TimesFormat(double(f.state_bytes()) / st0_.tiers[0].capacity_bytes),
      FormatByteSize(st0_.tiers[0].capacity_bytes),
      FormatByteSize(st0_.tiers[1].capacity_bytes),
      FormatByteSize(st0_.tiers[2].capacity_bytes), TierName(m.home),
      TierName(m.optimizer_tier),
      model_->streams_optimizer()
          ? " (streamed in 4 MiB parts: the host budget is below one "
            "layer's whole update)"
          : "",
      st0_.device_backend, st0_.device_memory, compute_->name());
  if (dist_) {
    absl::PrintF(
        "strata train: --distributed: %s over %s, %s of the parameters, "
        "gradients and Adam states (the state above is one rank's) and "
        "training %d (--batch x --accumulate) of every step's %d samples\n",
        ranks_ == 1 ? "1 rank" : absl::StrFormat("%d ranks", ranks_),
        dist_->model_transport(),
        ranks_ == 1 ? "holding all"
                    : absl::StrFormat("each holding 1/%d", ranks_),
        m.batch * m.accumulate, m.batch * m.accumulate * ranks_);
  }
  std::fflush(stdout);
}

std::optional<int> MlpTrain::PrepareCheckpoints() {
  if (!checkpoints_->resume_path().empty()) {
    absl::StatusOr<train::Resumed> resumed =
        train::ResumeMlp(checkpoints_->resume_path(), *store_, *model_, t_);
    if (!resumed.ok()) return End(FailBeforeRun(resumed.status()));
    checkpoints_->Resumed(*resumed);
  }
  t_.after_step = [this](const train::StepDone& done) {
    return checkpoints_->AfterStep(*store_, done.step, done.total_steps, [&] {
      return train::MlpCheckpoint(*model_, t_, done);
    });
  };
  return std::nullopt;
}

std::optional<int> MlpTrain::Train() {
  MlpProgressLine progress(!dist_ || dist_->rank() == 0);  // printed once
  moved_.emplace(st0_);
  std::vector<double> losses;  // for the report of a run that fails
  absl::StatusOr<train::TrainResult> result = train::Train(
      *model_, data_->train, data_->test, t_,
      [&](const train::Progress& p) {
        losses.push_back(p.loss);
        progress.Update(p);
        if (!plot_path_.empty()) moved_->Record(store_->GetStats());
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
    ReportFailedRun(result.status(), json_path_, store_->GetStats(), losses,
                    *checkpoints_,
                    {{"config", EffectiveConfig(*FindCommand("train"))}});
    return End(code);
  }
  result_.emplace(std::move(*result));
  return std::nullopt;
}

int MlpTrain::WriteOutputs() {
  const train::TrainResult& result = *result_;
  const train::ModelFootprint& f = model_->footprint();
  const Stats st = store_->GetStats();
  PrintMlpTable(f, result, st, *model_, t_);
  nlohmann::json ranks_json;
  if (dist_) {
    absl::StatusOr<nlohmann::json> j =
        dist_->ReportJson(st, model_->train_bytes_sent(),
                          static_cast<int64_t>(result.losses.size()));
    if (!j.ok()) return End(Fail(j.status()));
    ranks_json = std::move(*j);
    DistributedRun::PrintRanks(ranks_json);
  }
  if (!json_path_.empty()) {
    nlohmann::json report =
        MlpReportJson(t_, store_options_, f, result, st, compute_->name());
    report.update(MlpTrainingModesJson(*model_, t_, result));
    report.update(checkpoints_->ReportJson());
    report["optimizer_streamed"] = model_->streams_optimizer();
    if (dist_) report["distributed"] = ranks_json;
    if (absl::Status w = WriteReportJson(json_path_, report); !w.ok()) {
      return Fail(w);
    }
  }
  if (!timeline_path_.empty()) {
    if (absl::Status w = store_->WriteTimeline(timeline_path_); !w.ok()) {
      return Fail(w);
    }
  }
  if (!plot_path_.empty()) {
    if (absl::Status p =
            PlotTraining(MlpPlotData(t_, result, *moved_), plot_path_);
        !p.ok()) {
      return Fail(p);
    }
    absl::PrintF("plot written to %s\n", plot_path_);
  }
  return 0;
}

}  // namespace

int RunMlpTrain(const std::string& json_path, const std::string& timeline_path,
                const std::string& plot_path) {
  MlpTrain run(json_path, timeline_path, plot_path);
  run.NameGptFlags();
  for (std::optional<int> (MlpTrain::*step)() :
       {&MlpTrain::ReadFlags, &MlpTrain::CheckOutputs, &MlpTrain::ApplyResident,
        &MlpTrain::StartDistributed, &MlpTrain::LoadData, &MlpTrain::OpenSetup,
        &MlpTrain::PrepareCheckpoints, &MlpTrain::Train}) {
    if (std::optional<int> code = (run.*step)()) return *code;
  }
  return run.WriteOutputs();
}

}  // namespace strata
