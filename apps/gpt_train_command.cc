// gpt_train_command.cc: `strata train --model=gpt` (see gpt_train_command.h):
// flags, corpus, the run, the sample, the progress line and the report.
#include "apps/gpt_train_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
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
#include "apps/cli/precision_flags.h"
#include "apps/cli/store_flags.h"
#include "apps/cli/train_defaults.h"
#include "apps/cli/train_plot.h"
#include "apps/distributed_run.h"
#include "apps/failed_run.h"
#include "apps/train_flags.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "base/splitmix64.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "strata/store.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/data/bigram.h"
#include "train/data/lm_batcher.h"
#include "train/data/lm_corpus.h"
#include "train/model/gpt.h"
#include "train/run/gpt_setup.h"
#include "train/run/lm_trainer.h"
#include "train/run/metrics.h"
#include "train/run/train_checkpoint.h"

ABSL_FLAG(int32_t, layers, 8, "Transformer blocks.");
ABSL_FLAG(int32_t, heads, 4, "Attention heads (must divide --embed).");
ABSL_FLAG(int64_t, embed, 128, "Embedding width C (channels per token).");
ABSL_FLAG(int64_t, context, 128,
          "Tokens per sequence T (the attention "
          "span).");
ABSL_FLAG(std::string, tokenizer, "bpe",
          "byte (256 ids, one per byte) or bpe "
          "(SentencePiece BPE of --vocab ids trained once on the training "
          "split, cached).");
ABSL_FLAG(int64_t, vocab, 0,
          "Vocabulary size; 0 = the tokenizer's "
          "default (bpe: 4096; byte: 256). With byte, a larger value pads "
          "the classifier (--vocab=50304: GPT-2's shape).");
ABSL_FLAG(std::string, corpus, "",
          "A text file to train on, one line per "
          "line, the last ~10% of lines for validation; default: the King "
          "James Bible (Debian package bible-kjv).");
ABSL_FLAG(std::string, cache_dir, "",
          "Where the split, the tokenizer and the "
          "token shards are cached; default $XDG_CACHE_HOME/strata or "
          "~/.cache/strata.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Validation loss every N steps (and at "
          "the end); 0 = at the end only.");
ABSL_FLAG(int64_t, eval_tokens, 65536,
          "Validation tokens scored per evaluation "
          "(from the start of the split, whole windows of --context "
          "tokens: at least --context); 0 = all of it.");
ABSL_FLAG(int64_t, warmup_steps, -1,
          "Linear learning-rate warm-up steps; "
          "-1 = a tenth of the run.");
ABSL_FLAG(double, weight_decay, 0.1,
          "AdamW's decoupled weight decay, on 2-D "
          "weights only.");
ABSL_FLAG(double, grad_clip, 1.0,
          "Clip the global gradient norm to this "
          "(exact: a step beyond it is rolled back and re-run); 0 = off.");
ABSL_FLAG(int64_t, sample, 0,
          "Print this many generated tokens after "
          "training, continuing the start of the validation split.");

namespace strata {
namespace {

constexpr int64_t kGptBpeVocab = 4096;

// The GPT's defaults (train_defaults.h) for the flags it shares with the
// MLP, where the command line (or --config) leaves them unset.
void ApplyGptDefaults() {
  if (!FlagGiven("batch")) absl::SetFlag(&FLAGS_batch, kGptBatch);
  if (!FlagGiven("max_steps")) absl::SetFlag(&FLAGS_max_steps, kGptSteps);
  if (!FlagGiven("lr")) absl::SetFlag(&FLAGS_lr, kGptLr);
  SetUnsetBudgets(kGptDeviceBudget, kGptHostBudget, kGptNvmeBudget);
}

struct GptRun {
  train::GptConfig model;
  train::LmTrainOptions train;
  train::LmCorpusOptions corpus;
  int64_t eval_tokens = 0;
  int64_t sample = 0;
};

absl::StatusOr<GptRun> GptRunFromFlags() {
  GptRun r;
  train::GptConfig& m = r.model;
  m.layers = absl::GetFlag(FLAGS_layers);
  m.heads = absl::GetFlag(FLAGS_heads);
  m.embed = absl::GetFlag(FLAGS_embed);
  m.context = absl::GetFlag(FLAGS_context);
  m.batch = absl::GetFlag(FLAGS_batch);
  m.accumulate = absl::GetFlag(FLAGS_accumulate);
  m.seed = absl::GetFlag(FLAGS_seed);
  m.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  m.grad_clip = static_cast<float>(absl::GetFlag(FLAGS_grad_clip));
  STRATA_ASSIGN_OR_RETURN(m.checkpoint, train::ParseActivationCheckpointing(
                                            absl::GetFlag(FLAGS_checkpoint)));
  STRATA_RETURN_IF_ERROR(PrecisionFromFlags(m));
  const double lr = absl::GetFlag(FLAGS_lr);
  if (!(lr >= 1e-30 && lr < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr=%g: must be in [1e-30, 1)", lr));
  }
  m.adam.lr = static_cast<float>(lr);
  const std::string opt = absl::GetFlag(FLAGS_optimizer_tier);
  if (opt != "host" && opt != "device") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--optimizer-tier=%s: use host or device", opt));
  }
  m.optimizer_tier = opt == "host" ? Tier::kHost : Tier::kDevice;
  train::LmTrainOptions& t = r.train;
  t.steps = absl::GetFlag(FLAGS_max_steps);
  if (t.steps < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-steps=%d: the GPT trains for a number of steps (>= 1)",
        t.steps));
  }
  const int64_t warmup = absl::GetFlag(FLAGS_warmup_steps);
  if (warmup < -1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--warmup-steps=%d: use -1 (a tenth of the run) or a count >= 0",
        warmup));
  }
  t.warmup_steps = warmup < 0 ? t.steps / 10 : warmup;
  const std::string schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (schedule != "cosine" && schedule != "constant") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--lr-schedule=%s: use cosine or constant", schedule));
  }
  t.cosine_schedule = schedule == "cosine";
  t.eval_every = absl::GetFlag(FLAGS_eval_every);
  t.seed = m.seed;
  r.eval_tokens = absl::GetFlag(FLAGS_eval_tokens);
  r.sample = absl::GetFlag(FLAGS_sample);
  for (const auto& [flag, value] : {std::pair{"--eval-every", t.eval_every},
                                    std::pair{"--eval-tokens", r.eval_tokens},
                                    std::pair{"--sample", r.sample}}) {
    if (value < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s=%d: give a count >= 0", flag, value));
    }
  }
  // Validation scores whole windows of --context tokens (ValidationWindows):
  // refused here, before the corpus is prepared, rather than after.
  if (r.eval_tokens > 0 && r.eval_tokens < m.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--eval-tokens=%d scores less than one validation window of "
        "--context=%d tokens: give at least %d, or 0 for the whole split",
        r.eval_tokens, m.context, m.context));
  }
  const std::string tok = absl::GetFlag(FLAGS_tokenizer);
  int64_t vocab = absl::GetFlag(FLAGS_vocab);
  if (tok == "byte") {
    if (vocab != 0 && vocab < 256) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--vocab=%d with --tokenizer=byte: bytes need 256 ids (drop "
          "--vocab, or give at least 256 to pad the classifier, as GPT-2 "
          "pads 50257 to 50304)",
          vocab));
    }
    r.corpus.tokenizer = "byte";
    r.model.vocab = std::max<int64_t>(256, vocab);
  } else if (tok == "bpe") {
    if (vocab == 0) vocab = kGptBpeVocab;
    if (vocab <= 256) {
      return absl::InvalidArgumentError(
          "--tokenizer=bpe needs --vocab above 256, e.g. --vocab=4096");
    }
    r.corpus.tokenizer = absl::StrFormat("bpe:%d", vocab);
    r.model.vocab = vocab;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("--tokenizer=%s: use byte or bpe", tok));
  }
  r.corpus.tokenizer_seed = m.seed;
  r.corpus.corpus_path = absl::GetFlag(FLAGS_corpus);
  r.corpus.cache_dir = absl::GetFlag(FLAGS_cache_dir);
  return r;
}

// The progress line: redrawn in place on a terminal, every twentieth of the
// run otherwise.
void PrintProgress(const train::LmProgress& p, bool tty) {
  const int64_t every = std::max<int64_t>(1, p.steps / 20);
  if (!tty && p.step % every != 0 && p.step != p.steps) return;
  std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  %.0f tokens/s  %.1f s%s",
               tty ? "\r" : "", static_cast<long long>(p.step),
               static_cast<long long>(p.steps), p.loss, p.tokens_per_second,
               p.seconds, tty ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

// `text` with control bytes other than newline and tab shown as '?': an
// undertrained byte model emits any byte, and a terminal must not run them.
std::string Printable(std::string text) {
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) c = '?';
  }
  return text;
}

// Samples `count` tokens after the first window of the validation split
// (temperature 1, SplitMix64 from `seed`), one forward pass per token.
absl::StatusOr<std::string> Sample(train::Gpt& gpt,
                                   const train::LmCorpus& corpus, int64_t count,
                                   uint64_t seed, std::string* prompt) {
  const int64_t T = gpt.config().context;
  std::vector<int32_t> window(T + 1);
  STRATA_RETURN_IF_ERROR(corpus.validation->Read(0, T, window.data()));
  window.resize(T);
  *prompt = Printable(corpus.tokenizer->Decode(window));
  std::vector<int32_t> out;
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    STRATA_ASSIGN_OR_RETURN(std::vector<float> logits,
                            gpt.LastLogits(window.data(), 1, 0));
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float& z : logits) sum += (z = std::exp(z - max));
    double u = (SplitMix64Next(state) >> 11) * 0x1.0p-53 * sum;
    int32_t next = 0;
    while (next + 1 < static_cast<int32_t>(logits.size()) &&
           u >= logits[next]) {
      u -= logits[next++];
    }
    out.push_back(next);
    window.erase(window.begin());
    window.push_back(next);
  }
  return Printable(corpus.tokenizer->Decode(out));
}

nlohmann::json ReportJson(const GptRun& run, const StoreOptions& s,
                          train::Gpt& gpt, const train::LmTrainResult& r,
                          double baseline, const train::LmCorpus& corpus,
                          const Stats& st, const std::string& compute) {
  const train::GptConfig& m = gpt.config();
  const train::ModelFootprint& f = gpt.footprint();
  const train::ClipStats& clip = gpt.clip_stats();
  nlohmann::json evals = nlohmann::json::array();
  for (const train::LmEval& e : r.evals) {
    evals.push_back({{"step", e.step}, {"val_loss", e.val_loss}});
  }
  nlohmann::json report = {
      {"model", "gpt"},
      {"val_loss", r.val_loss},
      {"val_tokens", r.val_tokens},
      {"baseline_val_loss", baseline},
      {"val_loss_below_baseline", 1.0 - r.val_loss / baseline},
      {"final_loss", r.final_loss},
      {"losses", r.losses},
      {"evals", evals},
      {"tokens_per_second", r.tokens_per_second},
      {"step_seconds_median", train::Median(r.step_seconds)},
      {"optimizer_seconds_per_step", train::Median(r.optimizer_seconds)},
      {"adam_vector_path", train::VectorPathName(train::ChosenVectorPath())},
      {"adam_threads", train::HostPool::Shared().threads()},
      {"parameters", train::GptParameterCount(m)},
      {"model_state_bytes", f.state_bytes()},
      {"activation_bytes", f.activation_bytes},
      {"rollback_backup_bytes", f.backup_bytes},
      {"checkpoint", train::ActivationCheckpointingName(m.checkpoint)},
      {"accumulate", m.accumulate},
      {"recompute_seconds", gpt.recompute_seconds()},
      {"peak_activation_bytes", gpt.peak_activation_bytes()},
      {"clipping",
       {{"max_norm", m.grad_clip},
        {"clipped_steps", clip.clipped},
        {"rolled_back_steps", clip.rolled_back},
        {"deferred_steps", clip.deferred},
        {"rollback_seconds", gpt.rollback_seconds()},
        {"backup_bytes_copied", clip.backup_bytes},
        {"last_norm", clip.last_norm}}},
      {"steps", r.losses.size()},
      {"train_seconds", r.train_seconds},
      {"eval_seconds", r.eval_seconds},
      {"compute", compute},
      {"tokenizer", corpus.tokenizer->name()},
      {"corpus",
       {{"train_tokens", corpus.train_tokens()},
        {"validation_tokens", corpus.validation_tokens()},
        {"train_shard", corpus.train_shard_path},
        {"validation_shard", corpus.validation_shard_path}}},
      {"config", EffectiveConfig(*FindCommand("train"))},
      {"resolved",
       {{"layers", m.layers},
        {"heads", m.heads},
        {"embed", m.embed},
        {"context", m.context},
        {"vocab", m.vocab},
        {"batch", m.batch},
        {"accumulate", m.accumulate},
        {"max_steps", run.train.steps},
        {"warmup_steps", run.train.warmup_steps},
        {"lr", m.adam.lr},
        {"lr_schedule", run.train.cosine_schedule ? "cosine" : "constant"},
        {"weight_decay", m.weight_decay},
        {"grad_clip", m.grad_clip},
        {"seed", m.seed},
        {"classifier_rows", m.classifier_rows},
        {"optimizer_tier", TierName(m.optimizer_tier)},
        {"home_tier", TierName(m.home)},
        {"prefetch", s.scheduler.prefetch},
        {"eviction", EvictionPolicyName(s.scheduler.eviction)}}},
  };
  report.update(StoreReportJson(st));
  report.update(PrecisionJson(m.precision, m.rounding, gpt.skipped_steps(),
                              gpt.loss_scale()));
  report.update(BytesPerParamStepJson(gpt.train_link_bytes(),
                                      static_cast<int64_t>(r.losses.size()),
                                      train::GptParameterCount(m)));
  return report;
}

void PrintTable(train::Gpt& gpt, const train::LmTrainResult& r, double baseline,
                const Stats& st) {
  const train::ClipStats& clip = gpt.clip_stats();
  absl::PrintF("\n%-22s %s\n", "result", "value");
  const double margin = 100 * (1 - r.val_loss / baseline);
  absl::PrintF(
      "%-22s %.4f nats/token over %d tokens (%.1f%% %s the bigram baseline "
      "%.4f)\n",
      "validation loss", r.val_loss, r.val_tokens, std::fabs(margin),
      margin >= 0 ? "below" : "above", baseline);
  absl::PrintF("%-22s %.4f\n", "final train loss", r.final_loss);
  PrintStoreRows(st, gpt.footprint().state_bytes());
  PrintNvmeFloorRow(st, gpt.train_link_bytes(),
                    static_cast<int64_t>(r.losses.size()));
  const double step = train::Median(r.step_seconds);
  absl::PrintF("%-22s %.1f ms (%zu steps, %.1f s training, %.0f tokens/s)\n",
               "step median", step * 1e3, r.losses.size(), r.train_seconds,
               r.tokens_per_second);
  const double adam = train::Median(r.optimizer_seconds);
  absl::PrintF("%-22s %.2f ms per step (median, %.1f%% of the step; %s, %s)\n",
               "optimizer (AdamW)", adam * 1e3,
               step > 0 ? 100 * adam / step : 0.0,
               train::VectorPathName(train::ChosenVectorPath()),
               ThreadsFormat(train::HostPool::Shared().threads()));
  absl::PrintF(
      "%-22s %lld of %lld steps clipped; %lld speculative update(s) rolled "
      "back (%.2f s re-running); %lld steps updated at the step's end "
      "(deferred); %s copied to backups\n",
      "gradient clipping", static_cast<long long>(clip.clipped),
      // The whole run's, as the counters are (a resumed run's too).
      static_cast<long long>(clip.steps + gpt.skipped_steps()),
      static_cast<long long>(clip.rolled_back), gpt.rollback_seconds(),
      static_cast<long long>(clip.deferred), FormatByteSize(clip.backup_bytes));
  const train::GptConfig& c = gpt.config();
  absl::PrintF(
      "%-22s %s peak (--checkpoint=%s, %.2f s recomputing; "
      "--accumulate=%d)\n",
      "activations", FormatByteSize(gpt.peak_activation_bytes()),
      train::ActivationCheckpointingName(c.checkpoint), gpt.recompute_seconds(),
      c.accumulate);
  PrintPrecisionRow(c.precision, c.rounding, gpt.skipped_steps(),
                    gpt.loss_scale());
}

// The plot of the run: loss per step, validation loss per evaluation, bytes
// per step.
TrainPlotData PlotData(const train::GptConfig& m, const train::LmTrainResult& r,
                       const LinkBytesPerStep& moved) {
  TrainPlotData d{
      .title = absl::StrFormat("strata train --model=gpt: %d layers, embed "
                               "%d, context %d, batch %d",
                               m.layers, m.embed, m.context, m.batch),
      .losses = r.losses,
      .eval_name = "validation loss",
      .link_bytes = moved.bytes()};
  for (const train::LmEval& e : r.evals)
    d.evals.push_back({e.step, e.val_loss});
  return d;
}

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

}  // namespace

int RunGptTrain(const std::string& json_path, const std::string& timeline_path,
                const std::string& plot_path) {
  ApplyGptDefaults();
  // The MLP's own flags are named, not silently ignored (as --model=mlp
  // names the GPT's). Without --model they are an error: the GPT became the
  // default model, and `strata train --width=512` means the MLP.
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
  StoreOptions& s = *sopt;
  s.timeline = !timeline_path.empty();
  // The store opens after the corpus is prepared (the model's vocabulary
  // comes from it): what it would refuse of the flags alone, refused now
  // (--resident replaces the tier flags later).
  if (!absl::GetFlag(FLAGS_resident)) {
    if (absl::Status o = Store::CheckOptions(s); !o.ok()) {
      return FailBeforeRun(o);
    }
  }
  for (const auto& [path, flag] : {std::pair{json_path, "--json"},
                                   std::pair{timeline_path, "--timeline"}}) {
    if (absl::Status w = CheckWritable(path, flag); !w.ok()) return Refuse(w);
  }
  if (absl::Status d = CheckDistinctFiles(
          {{json_path, "--json"},
           {timeline_path, "--timeline"},
           {plot_path, "--plot"}},
          {{run->corpus.corpus_path, "--corpus"},
           {absl::GetFlag(FLAGS_config), "--config"},
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
    return FailBeforeRun(checkpoints.status(), /*rank_own=*/true);
  }
  // --distributed: from here on, a rank's error ends every rank (end).
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
  // Sharded, rank 0 builds the corpus cache and the others then reuse it
  // (two ranks building one cache at once would race).
  const bool first = !dist || dist->rank() == 0;
  auto corpus_ready = [&] {
    return dist->Barrier("the wait for rank 0's corpus cache");
  };
  if (!first) {
    if (absl::Status ready = corpus_ready(); !ready.ok()) {
      return end(FailBeforeRun(ready));
    }
  }
  if (absl::Status found = train::CheckLmCorpusFile(run->corpus.corpus_path);
      !found.ok()) {
    return end(FailBeforeRun(found));
  }
  absl::PrintF(
      "strata train: preparing the corpus (split, tokenizer and shards "
      "are built once and reused from the cache)...\n");
  std::fflush(stdout);
  absl::StatusOr<train::LmCorpus> corpus = train::PrepareLmCorpus(run->corpus);
  if (!corpus.ok()) return end(FailBeforeRun(corpus.status()));
  if (dist && first) {
    if (absl::Status ready = corpus_ready(); !ready.ok()) {
      return end(FailBeforeRun(ready));
    }
  }
  train::GptConfig& m = run->model;
  m.vocab = std::max(m.vocab, corpus->tokenizer->vocab_size());
  if (absl::GetFlag(FLAGS_resident)) {
    if (absl::Status st = train::MakeGptResident(m, s); !st.ok()) {
      return end(FailBeforeRun(st));
    }
    absl::PrintF("strata train: --resident: device budget %s, no NVMe tier\n",
                 FormatByteSize(s.device.budget_bytes));
  }
  absl::StatusOr<double> baseline = train::BigramBaselineLoss(
      *corpus->train, *corpus->validation, corpus->tokenizer->vocab_size());
  if (!baseline.ok()) return end(FailBeforeRun(baseline.status()));
  if (dist) s.device.cuda_device = DistributedRun::CudaDevice();
  absl::StatusOr<std::unique_ptr<train::GptSetup>> setup = train::OpenGptSetup(
      s, m, dist ? dist->collectives() : nullptr, blas_threads);
  if (!setup.ok()) return end(FailBeforeRun(setup.status()));
  if (dist && (*setup)->gpu_collectives) dist->set_model_transport("nccl");
  train::Gpt& gpt = *(*setup)->model;
  Store* store = (*setup)->store.get();
  const Stats st0 = store->GetStats();
  const uint64_t state = gpt.footprint().state_bytes();
  absl::PrintF(
      "strata train: GPT %d layers x %d heads, embed %lld, context %lld, "
      "vocab %lld (%s), %.2fM parameters, %s of model state (%s the "
      "device budget %s), host budget %s, NVMe budget %s; %lld training "
      "tokens; %s with %s\n",
      m.layers, m.heads, static_cast<long long>(m.embed),
      static_cast<long long>(m.context), static_cast<long long>(m.vocab),
      corpus->tokenizer->name(), train::GptParameterCount(m) / 1e6,
      FormatByteSize(state),
      TimesFormat(double(state) / st0.tiers[0].capacity_bytes),
      FormatByteSize(st0.tiers[0].capacity_bytes),
      FormatByteSize(st0.tiers[1].capacity_bytes),
      FormatByteSize(st0.tiers[2].capacity_bytes),
      static_cast<long long>(corpus->train_tokens()), st0.device_backend,
      (*setup)->compute->name());
  if (dist) {
    const int ranks = dist->ranks();
    absl::PrintF(
        "strata train: --distributed: %s over %s, %s of the parameters, "
        "gradients and AdamW states (the state above is one rank's) and "
        "training %d (--batch x --accumulate) of every step's %d "
        "sequences\n",
        ranks == 1 ? "1 rank" : absl::StrFormat("%d ranks", ranks),
        dist->model_transport(),
        ranks == 1 ? "holding all"
                   : absl::StrFormat("each holding 1/%d", ranks),
        gpt.step_sequences() / ranks, gpt.step_sequences());
  }
  std::fflush(stdout);
  absl::StatusOr<train::LmBatcher> batches = train::LmBatcher::Create(
      corpus->train.get(), gpt.step_sequences(), m.context, run->train.seed);
  if (!batches.ok()) return end(FailBeforeRun(batches.status()));
  absl::StatusOr<train::ValidationWindows> windows =
      train::ValidationWindows::Create(corpus->validation.get(), m.context,
                                       run->eval_tokens);
  if (!windows.ok()) return end(FailBeforeRun(windows.status()));
  // The data a checkpoint was trained on: the tokenizer and the corpus's
  // cache name (its file name and content hash), so that resuming on
  // another corpus, whose token ids mean other things, is refused.
  const std::filesystem::path shards(corpus->dir);
  const std::string data =
      absl::StrFormat("%s on %s", run->corpus.tokenizer,
                      shards.parent_path().filename().string() + "/" +
                          shards.filename().string());
  if (!checkpoints->resume_path().empty()) {
    absl::StatusOr<train::Resumed> resumed = train::ResumeGpt(
        checkpoints->resume_path(), *store, gpt, *batches, run->train, data);
    if (!resumed.ok()) return end(FailBeforeRun(resumed.status()));
    checkpoints->Resumed(*resumed);
  }
  run->train.after_step = [&](int64_t step, absl::Span<const double> losses) {
    return checkpoints->AfterStep(*store, step, run->train.steps, [&] {
      return train::GptCheckpoint(gpt, run->train, data, *batches, step,
                                  losses);
    });
  };
  const bool tty = isatty(STDERR_FILENO) == 1;
  LinkBytesPerStep moved(st0);
  std::vector<double> losses;  // for the report of a run that fails
  absl::StatusOr<train::LmTrainResult> result = train::TrainLm(
      gpt, *batches, *windows, run->train,
      [&](const train::LmProgress& p) {
        losses.push_back(p.loss);
        if (first) PrintProgress(p, tty);  // once, by rank 0
        if (!plot_path.empty()) moved.Record(store->GetStats());
      },
      [&](const train::LmEval& e) {
        if (tty) std::fputs("\r\x1b[K", stderr);
        absl::PrintF("step %d: validation loss %.4f (bigram baseline %.4f)\n",
                     e.step, e.val_loss, *baseline);
        std::fflush(stdout);
      });
  if (tty) std::fputs("\r\x1b[K", stderr);
  if (!result.ok()) {
    const int code = Fail(result.status());
    ReportFailedRun(result.status(), json_path, store->GetStats(), losses,
                    *checkpoints,
                    {{"config", EffectiveConfig(*FindCommand("train"))}});
    return end(code);
  }
  const Stats st = store->GetStats();
  PrintTable(gpt, *result, *baseline, st);
  nlohmann::json report = ReportJson(*run, s, gpt, *result, *baseline, *corpus,
                                     st, (*setup)->compute->name());
  report.update(checkpoints->ReportJson());
  if (dist) {
    absl::StatusOr<nlohmann::json> ranks =
        dist->ReportJson(st, gpt.train_bytes_sent(),
                         static_cast<int64_t>(result->losses.size()));
    if (!ranks.ok()) return end(Fail(ranks.status()));
    DistributedRun::PrintRanks(*ranks);
    report["distributed"] = std::move(*ranks);
  }
  if (run->sample > 0) {
    std::string prompt;
    absl::StatusOr<std::string> text =
        Sample(gpt, *corpus, run->sample, m.seed, &prompt);
    if (!text.ok()) return end(Fail(text.status()));
    absl::PrintF(
        "\nsample (%lld tokens after \"...%s\"):\n%s\n",
        static_cast<long long>(run->sample),
        prompt.substr(prompt.size() - std::min<size_t>(40, prompt.size())),
        *text);
    report["sample"] = {{"prompt", prompt}, {"text", *text}};
  }
  if (!json_path.empty()) {
    if (absl::Status w = WriteReportJson(json_path, report); !w.ok())
      return end(Fail(w));
  }
  if (!timeline_path.empty()) {
    if (absl::Status w = store->WriteTimeline(timeline_path); !w.ok()) {
      return end(Fail(w));
    }
  }
  if (!plot_path.empty()) {
    if (absl::Status p = PlotTraining(PlotData(m, *result, moved), plot_path);
        !p.ok()) {
      return end(Fail(p));
    }
    absl::PrintF("plot written to %s\n", plot_path);
  }
  return 0;
}

}  // namespace strata
