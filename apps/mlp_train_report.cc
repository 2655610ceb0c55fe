// mlp_train_report.cc: what `strata train --model=mlp` shows and writes of a
// run (see mlp_train_report.h).
#include "apps/mlp_train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/train_flags.h"
#include "apps/train_report.h"
#include "base/byte_size.h"
#include "strata/option_names.h"
#include "train/compute/cpu/host_pool.h"
#include "train/compute/cpu/vector_path.h"
#include "train/model/activation_checkpointing.h"
#include "train/run/metrics.h"

namespace strata {
namespace {

// "[#########.........]" for a fraction in [0, 1].
std::string Bar(double fraction, int width = 24) {
  const int filled = std::clamp(static_cast<int>(fraction * width), 0, width);
  return "[" + std::string(filled, '#') + std::string(width - filled, '.') +
         "]";
}

}  // namespace

MlpProgressLine::MlpProgressLine(bool shown)
    : shown_(shown), tty_(isatty(STDERR_FILENO) == 1) {}

void MlpProgressLine::Update(const train::Progress& p) {
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

void MlpProgressLine::Clear() {
  if (shown_ && tty_) std::fputs("\r\x1b[K", stderr);
}

nlohmann::json MlpReportJson(const train::TrainOptions& t,
                             const StoreOptions& s,
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

nlohmann::json MlpTrainingModesJson(const train::Mlp& model,
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

void PrintMlpTable(const train::ModelFootprint& f, const train::TrainResult& r,
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

TrainPlotData MlpPlotData(const train::TrainOptions& t,
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

}  // namespace strata
