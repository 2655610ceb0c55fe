// gpt_train_report.cc: what `strata train --model=gpt` shows and writes of a
// run (see gpt_train_report.h).
#include "apps/gpt_train_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_format.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "base/splitmix64.h"
#include "strata/option_names.h"
#include "strata/status.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/run/metrics.h"

namespace strata {
namespace {

// `text` with control bytes other than newline and tab shown as '?': an
// undertrained byte model emits any byte, and a terminal must not run them.
std::string Printable(std::string text) {
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) c = '?';
  }
  return text;
}

// The flags as the run resolved them (defaults, the model's sizes, the
// schedule, the store's policies).
nlohmann::json ResolvedJson(const train::LmTrainOptions& options,
                            const StoreOptions& s, const train::GptConfig& m) {
  return {{"layers", m.layers},
          {"heads", m.heads},
          {"embed", m.embed},
          {"context", m.context},
          {"vocab", m.vocab},
          {"batch", m.batch},
          {"accumulate", m.accumulate},
          {"max_steps", options.steps},
          {"warmup_steps", options.warmup_steps},
          {"lr", m.adam.lr},
          {"lr_schedule", options.cosine_schedule ? "cosine" : "constant"},
          {"weight_decay", m.weight_decay},
          {"grad_clip", m.grad_clip},
          {"seed", m.seed},
          {"classifier_rows", m.classifier_rows},
          {"optimizer_tier", TierName(m.optimizer_tier)},
          {"home_tier", TierName(m.home)},
          {"prefetch", s.scheduler.prefetch},
          {"eviction", EvictionPolicyName(s.scheduler.eviction)}};
}

}  // namespace

void PrintGptProgress(const train::LmProgress& p, bool tty) {
  const int64_t every = std::max<int64_t>(1, p.steps / 20);
  if (!tty && p.step % every != 0 && p.step != p.steps) return;
  std::fprintf(stderr, "%sstep %lld/%lld  loss %.4f  %.0f tokens/s  %.1f s%s",
               tty ? "\r" : "", static_cast<long long>(p.step),
               static_cast<long long>(p.steps), p.loss, p.tokens_per_second,
               p.seconds, tty ? "\x1b[K" : "\n");
  std::fflush(stderr);
}

absl::StatusOr<std::string> SampleGpt(train::Gpt& gpt,
                                      const train::LmCorpus& corpus,
                                      int64_t count, uint64_t seed,
                                      std::string* prompt) {
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

nlohmann::json GptReportJson(const train::LmTrainOptions& options,
                             const StoreOptions& s, train::Gpt& gpt,
                             const train::LmTrainResult& r, double baseline,
                             const train::LmCorpus& corpus, const Stats& st,
                             const std::string& compute) {
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
      {"resolved", ResolvedJson(options, s, m)},
  };
  report.update(StoreReportJson(st));
  report.update(PrecisionJson(m.precision, m.rounding, gpt.skipped_steps(),
                              gpt.loss_scale()));
  report.update(BytesPerParamStepJson(gpt.train_link_bytes(),
                                      static_cast<int64_t>(r.losses.size()),
                                      train::GptParameterCount(m)));
  return report;
}

void PrintGptTable(train::Gpt& gpt, const train::LmTrainResult& r,
                   double baseline, const Stats& st) {
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

TrainPlotData GptPlotData(const train::GptConfig& m,
                          const train::LmTrainResult& r,
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

}  // namespace strata
