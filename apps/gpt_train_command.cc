// gpt_train_command.cc: `strata train --model=gpt` (see gpt_train_command.h):
// the run, step by step — flags and outputs checked, MPI started, the corpus
// prepared, the store and the model opened, training, the outputs written
// (its flags: gpt_train_flags.h; what it prints and writes:
// gpt_train_report.h).
#include "apps/gpt_train_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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
#include "apps/cli/store_flags.h"
#include "apps/cli/train_plot.h"
#include "apps/distributed_run.h"
#include "apps/failed_run.h"
#include "apps/gpt_train_flags.h"
#include "apps/gpt_train_report.h"
#include "apps/train_flags.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "strata/store.h"
#include "train/data/bigram.h"
#include "train/data/lm_batcher.h"
#include "train/data/lm_corpus.h"
#include "train/model/gpt.h"
#include "train/run/gpt_setup.h"
#include "train/run/lm_trainer.h"
#include "train/run/train_checkpoint.h"

namespace strata {
namespace {

// An output refused before the run: bad input, exit code 2.
int Refuse(const absl::Status& status) {
  DistributedRun::AwaitRankZeroRefusal(status);
  std::fprintf(stderr, "strata train: %s\n", ErrorText(status).c_str());
  return 2;
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "strata train: %s\n", ErrorText(status).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitBadInput
                                                             : kExitFailure;
}

// An error before training began: bad input unless the machine's.
// `rank_own`: an error of this rank's own files (its checkpoint directory),
// which rank 0 may not meet: printed at once, not left to rank 0.
int FailBeforeRun(const absl::Status& status, bool rank_own = false) {
  if (!rank_own) DistributedRun::AwaitRankZeroRefusal(status);
  std::fprintf(stderr, "strata train: %s\n", ErrorText(status).c_str());
  return ExitCodeBeforeRun(status);
}

// One GPT run, step by step (RunGptTrain calls them in order): each step
// returns the exit code when the run ends there, std::nullopt to go on. The
// members are declared in the order the steps make them, so they are
// destroyed in reverse: the model and the store before the corpus, and all
// of them before MPI ends.
class GptTrain {
 public:
  GptTrain(const std::string& json_path, const std::string& timeline_path,
           const std::string& plot_path)
      : json_path_(json_path),
        timeline_path_(timeline_path),
        plot_path_(plot_path) {}

  // The MLP's own flags are named, not silently ignored (as --model=mlp
  // names the GPT's). Without --model they are an error: the GPT became the
  // default model, and `strata train --width=512` means the MLP.
  std::optional<int> NameMlpFlags();
  // The run's and the store's flags: every refusal of their values alone,
  // before the corpus is prepared.
  std::optional<int> ReadFlags();
  // The output files (writable, distinct from the inputs and each other),
  // then --save-dir and --resume.
  std::optional<int> CheckOutputs();
  // --distributed: starts MPI; the ranks agree on the run and on the step
  // they resume from.
  std::optional<int> StartDistributed();
  // Prepares the corpus (sharded, rank 0 first) and takes the model's
  // vocabulary from its tokenizer.
  std::optional<int> PrepareCorpus();
  // --resident's budgets, the bigram baseline, then the store, the compute
  // and the model, and the banner saying what they are.
  std::optional<int> OpenSetup();
  // The training batches, the validation windows, the resumed state and
  // the checkpoint saved after each step.
  std::optional<int> PrepareBatches();
  // Trains, printing the progress and the evaluations; a run that fails
  // reports what it did.
  std::optional<int> Train();
  // The table, the ranks, the sample, then --json, --timeline and --plot.
  // Returns the exit code.
  int WriteOutputs();

 private:
  // Prints the line saying what runs (and, sharded, what each rank holds).
  void PrintBanner() const;
  // Prints --sample's text and adds it to `report`.
  std::optional<int> PrintSample(nlohmann::json& report) const;
  // --distributed: from StartDistributed on, a rank's error ends every
  // rank.
  int End(int code) const {
    if (code != 0 && dist_) dist_->Abort(code);
    return code;
  }

  const std::string json_path_, timeline_path_, plot_path_;
  GptRun run_;
  StoreOptions store_options_;
  std::optional<RunCheckpoints> checkpoints_;
  std::optional<DistributedRun> dist_;
  int blas_threads_ = 0;
  bool first_ = true;  // not sharded, or rank 0: builds the cache, prints
  std::optional<train::LmCorpus> corpus_;
  double baseline_ = 0;  // the bigram model's validation loss
  std::unique_ptr<train::GptSetup> setup_;
  train::Gpt* gpt_ = nullptr;  // setup_'s
  Store* store_ = nullptr;     // setup_'s
  Stats st0_;                  // the store's, before training
  std::optional<train::LmBatcher> batches_;
  std::optional<train::ValidationWindows> windows_;
  std::string data_;  // what a checkpoint was trained on
  std::optional<LinkBytesPerStep> moved_;
  std::optional<train::LmTrainResult> result_;
};

std::optional<int> GptTrain::NameMlpFlags() {
  for (const FlagEntry& f : FindCommand("train")->flags) {
    if (f.scope != ModelScope::kMlp || !FlagGiven(f.name)) continue;
    if (!FlagGiven("model")) {
      DistributedRun::AwaitRankZeroRefusal(absl::InvalidArgumentError("--"));
      std::fprintf(stderr,
                   "strata train: --%s is the MLP's, and the default model "
                   "is gpt: add --model=mlp\n",
                   Dashed(f.name).c_str());
      return 2;
    }
    if (DistributedRun::EchoesRankZero()) continue;  // rank 0 says it
    std::fprintf(stderr,
                 "strata train: --%s is the MLP's; --model=gpt ignores it\n",
                 Dashed(f.name).c_str());
  }
  return std::nullopt;
}

std::optional<int> GptTrain::ReadFlags() {
  absl::StatusOr<GptRun> run = GptRunFromFlags();
  absl::StatusOr<StoreOptions> sopt = StoreOptionsFromFlags();
  // Checked alone first: a refusal every rank meets alike prints once.
  if (absl::Status c = RunCheckpoints::CheckFlagValues(); !c.ok()) {
    return Refuse(c);
  }
  if (!run.ok()) return FailBeforeRun(run.status());
  if (!sopt.ok()) return FailBeforeRun(sopt.status());
  {  // A bad shape is refused before the corpus is prepared.
    train::GptConfig probe = run->model;
    probe.classifier_rows = 1;
    if (absl::Status st = train::ComputeGptFootprint(probe).status();
        !st.ok()) {
      return FailBeforeRun(st);
    }
  }
  run_ = std::move(*run);
  store_options_ = std::move(*sopt);
  StoreOptions& s = store_options_;
  s.timeline = !timeline_path_.empty();
  // The store opens after the corpus is prepared (the model's vocabulary
  // comes from it): what it would refuse of the flags alone, refused now
  // (--resident replaces the tier flags later).
  if (!absl::GetFlag(FLAGS_resident)) {
    if (absl::Status o = Store::CheckOptions(s); !o.ok()) {
      return FailBeforeRun(o);
    }
  }
  return std::nullopt;
}

std::optional<int> GptTrain::CheckOutputs() {
  if (absl::Status o =
          CheckTrainOutputs(json_path_, timeline_path_, plot_path_,
                            {{run_.corpus.corpus_path, "--corpus"}});
      !o.ok()) {
    return Refuse(o);
  }
  // After the refusals of the flags: a refused run leaves no --save-dir
  // created or locked.
  absl::StatusOr<RunCheckpoints> checkpoints = RunCheckpoints::FromFlags(
      DistributedRun::Requested() ? DistributedRun::RankDirName() : "");
  if (!checkpoints.ok()) {
    return FailBeforeRun(checkpoints.status(), /*rank_own=*/true);
  }
  checkpoints_.emplace(std::move(*checkpoints));
  return std::nullopt;
}

std::optional<int> GptTrain::StartDistributed() {
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

std::optional<int> GptTrain::PrepareCorpus() {
  // Sharded, rank 0 builds the corpus cache and the others then reuse it
  // (two ranks building one cache at once would race).
  first_ = !dist_ || dist_->rank() == 0;
  auto corpus_ready = [&] {
    return dist_->Barrier("the wait for rank 0's corpus cache");
  };
  if (!first_) {
    if (absl::Status ready = corpus_ready(); !ready.ok()) {
      return End(FailBeforeRun(ready));
    }
  }
  if (absl::Status found = train::CheckLmCorpusFile(run_.corpus.corpus_path);
      !found.ok()) {
    return End(FailBeforeRun(found));
  }
  absl::PrintF(
      "strata train: preparing the corpus (split, tokenizer and shards "
      "are built once and reused from the cache)...\n");
  std::fflush(stdout);
  absl::StatusOr<train::LmCorpus> corpus = train::PrepareLmCorpus(run_.corpus);
  if (!corpus.ok()) return End(FailBeforeRun(corpus.status()));
  corpus_.emplace(std::move(*corpus));
  if (dist_ && first_) {
    if (absl::Status ready = corpus_ready(); !ready.ok()) {
      return End(FailBeforeRun(ready));
    }
  }
  train::GptConfig& m = run_.model;
  m.vocab = std::max(m.vocab, corpus_->tokenizer->vocab_size());
  return std::nullopt;
}

std::optional<int> GptTrain::OpenSetup() {
  train::GptConfig& m = run_.model;
  StoreOptions& s = store_options_;
  if (absl::GetFlag(FLAGS_resident)) {
    if (absl::Status st = train::MakeGptResident(m, s); !st.ok()) {
      return End(FailBeforeRun(st));
    }
    absl::PrintF("strata train: --resident: device budget %s, no NVMe tier\n",
                 FormatByteSize(s.device.budget_bytes));
  }
  absl::StatusOr<double> baseline = train::BigramBaselineLoss(
      *corpus_->train, *corpus_->validation, corpus_->tokenizer->vocab_size());
  if (!baseline.ok()) return End(FailBeforeRun(baseline.status()));
  baseline_ = *baseline;
  if (dist_) s.device.cuda_device = DistributedRun::CudaDevice();
  absl::StatusOr<std::unique_ptr<train::GptSetup>> setup = train::OpenGptSetup(
      s, m, dist_ ? dist_->collectives() : nullptr, blas_threads_);
  if (!setup.ok()) return End(FailBeforeRun(setup.status()));
  setup_ = std::move(*setup);
  if (dist_ && setup_->gpu_collectives) dist_->set_model_transport("nccl");
  gpt_ = setup_->model.get();
  store_ = setup_->store.get();
  st0_ = store_->GetStats();
  PrintBanner();
  return std::nullopt;
}

void GptTrain::PrintBanner() const {
  const train::GptConfig& m = run_.model;
  const uint64_t state = gpt_->footprint().state_bytes();
  absl::PrintF(
      "strata train: GPT %d layers x %d heads, embed %lld, context %lld, "
      "vocab %lld (%s), %.2fM parameters, %s of model state (%s the "
      "device budget %s), host budget %s, NVMe budget %s; %lld training "
      "tokens; %s with %s\n",
      m.layers, m.heads, static_cast<long long>(m.embed),
      static_cast<long long>(m.context), static_cast<long long>(m.vocab),
      corpus_->tokenizer->name(), train::GptParameterCount(m) / 1e6,
      FormatByteSize(state),
      TimesFormat(double(state) / st0_.tiers[0].capacity_bytes),
      FormatByteSize(st0_.tiers[0].capacity_bytes),
      FormatByteSize(st0_.tiers[1].capacity_bytes),
      FormatByteSize(st0_.tiers[2].capacity_bytes),
      static_cast<long long>(corpus_->train_tokens()), st0_.device_backend,
      setup_->compute->name());
  if (dist_) {
    const int ranks = dist_->ranks();
    absl::PrintF(
        "strata train: --distributed: %s over %s, %s of the parameters, "
        "gradients and AdamW states (the state above is one rank's) and "
        "training %d (--batch x --accumulate) of every step's %d "
        "sequences\n",
        ranks == 1 ? "1 rank" : absl::StrFormat("%d ranks", ranks),
        dist_->model_transport(),
        ranks == 1 ? "holding all"
                   : absl::StrFormat("each holding 1/%d", ranks),
        gpt_->step_sequences() / ranks, gpt_->step_sequences());
  }
  std::fflush(stdout);
}

std::optional<int> GptTrain::PrepareBatches() {
  const train::GptConfig& m = run_.model;
  absl::StatusOr<train::LmBatcher> batches = train::LmBatcher::Create(
      corpus_->train.get(), gpt_->step_sequences(), m.context, run_.train.seed);
  if (!batches.ok()) return End(FailBeforeRun(batches.status()));
  batches_.emplace(std::move(*batches));
  absl::StatusOr<train::ValidationWindows> windows =
      train::ValidationWindows::Create(corpus_->validation.get(), m.context,
                                       run_.eval_tokens);
  if (!windows.ok()) return End(FailBeforeRun(windows.status()));
  windows_.emplace(std::move(*windows));
  // The data a checkpoint was trained on: the tokenizer and the corpus's
  // cache name (its file name and content hash), so that resuming on
  // another corpus, whose token ids mean other things, is refused.
  const std::filesystem::path shards(corpus_->dir);
  data_ = absl::StrFormat("%s on %s", run_.corpus.tokenizer,
                          shards.parent_path().filename().string() + "/" +
                              shards.filename().string());
  if (!checkpoints_->resume_path().empty()) {
    absl::StatusOr<train::Resumed> resumed =
        train::ResumeGpt(checkpoints_->resume_path(), *store_, *gpt_, *batches_,
                         run_.train, data_);
    if (!resumed.ok()) return End(FailBeforeRun(resumed.status()));
    checkpoints_->Resumed(*resumed);
  }
  run_.train.after_step = [this](int64_t step,
                                 absl::Span<const double> losses) {
    return checkpoints_->AfterStep(*store_, step, run_.train.steps, [&] {
      return train::GptCheckpoint(*gpt_, run_.train, data_, *batches_, step,
                                  losses);
    });
  };
  return std::nullopt;
}

std::optional<int> GptTrain::Train() {
  const bool tty = isatty(STDERR_FILENO) == 1;
  moved_.emplace(st0_);
  std::vector<double> losses;  // for the report of a run that fails
  absl::StatusOr<train::LmTrainResult> result = train::TrainLm(
      *gpt_, *batches_, *windows_, run_.train,
      [&](const train::LmProgress& p) {
        losses.push_back(p.loss);
        if (first_) PrintGptProgress(p, tty);  // once, by rank 0
        if (!plot_path_.empty()) moved_->Record(store_->GetStats());
      },
      [&](const train::LmEval& e) {
        if (tty) std::fputs("\r\x1b[K", stderr);
        absl::PrintF("step %d: validation loss %.4f (bigram baseline %.4f)\n",
                     e.step, e.val_loss, baseline_);
        std::fflush(stdout);
      });
  if (tty) std::fputs("\r\x1b[K", stderr);
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

int GptTrain::WriteOutputs() {
  const train::LmTrainResult& result = *result_;
  const Stats st = store_->GetStats();
  PrintGptTable(*gpt_, result, baseline_, st);
  nlohmann::json report =
      GptReportJson(run_.train, store_options_, *gpt_, result, baseline_,
                    *corpus_, st, setup_->compute->name());
  report.update(checkpoints_->ReportJson());
  if (dist_) {
    absl::StatusOr<nlohmann::json> ranks =
        dist_->ReportJson(st, gpt_->train_bytes_sent(),
                          static_cast<int64_t>(result.losses.size()));
    if (!ranks.ok()) return End(Fail(ranks.status()));
    DistributedRun::PrintRanks(*ranks);
    report["distributed"] = std::move(*ranks);
  }
  if (run_.sample > 0) {
    if (std::optional<int> code = PrintSample(report)) return *code;
  }
  if (!json_path_.empty()) {
    if (absl::Status w = WriteReportJson(json_path_, report); !w.ok())
      return End(Fail(w));
  }
  if (!timeline_path_.empty()) {
    if (absl::Status w = store_->WriteTimeline(timeline_path_); !w.ok()) {
      return End(Fail(w));
    }
  }
  if (!plot_path_.empty()) {
    if (absl::Status p =
            PlotTraining(GptPlotData(run_.model, result, *moved_), plot_path_);
        !p.ok()) {
      return End(Fail(p));
    }
    absl::PrintF("plot written to %s\n", plot_path_);
  }
  return 0;
}

std::optional<int> GptTrain::PrintSample(nlohmann::json& report) const {
  std::string prompt;
  absl::StatusOr<std::string> text =
      SampleGpt(*gpt_, *corpus_, run_.sample, run_.model.seed, &prompt);
  if (!text.ok()) return End(Fail(text.status()));
  absl::PrintF(
      "\nsample (%lld tokens after \"...%s\"):\n%s\n",
      static_cast<long long>(run_.sample),
      prompt.substr(prompt.size() - std::min<size_t>(40, prompt.size())),
      *text);
  report["sample"] = {{"prompt", prompt}, {"text", *text}};
  return std::nullopt;
}

}  // namespace

int RunGptTrain(const std::string& json_path, const std::string& timeline_path,
                const std::string& plot_path) {
  ApplyGptDefaults();
  GptTrain run(json_path, timeline_path, plot_path);
  for (std::optional<int> (GptTrain::*step)() :
       {&GptTrain::NameMlpFlags, &GptTrain::ReadFlags, &GptTrain::CheckOutputs,
        &GptTrain::StartDistributed, &GptTrain::PrepareCorpus,
        &GptTrain::OpenSetup, &GptTrain::PrepareBatches, &GptTrain::Train}) {
    if (std::optional<int> code = (run.*step)()) return *code;
  }
  return run.WriteOutputs();
}

}  // namespace strata
