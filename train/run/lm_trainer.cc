// lm_trainer.cc: the language-model step loop (see lm_trainer.h).
#include "train/run/lm_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"
#include "strata/status.h"

namespace strata::train {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double MeanOfLastTenth(const std::vector<double> &v) {
  if (v.empty()) return 0;
  const size_t n = std::max<size_t>(1, v.size() / 10);
  double sum = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) sum += v[i];
  return sum / n;
}

}  // namespace

float LmLearningRate(const LmTrainOptions &o, float lr, int64_t step) {
  if (step < o.warmup_steps) {
    return lr * static_cast<float>(step + 1) / o.warmup_steps;
  }
  if (!o.cosine_schedule) return lr;
  const int64_t decay = std::max<int64_t>(1, o.steps - o.warmup_steps - 1);
  const double progress =
      std::min(1.0, double(step - o.warmup_steps) / double(decay));
  const double floor = lr * o.min_lr_fraction;
  return static_cast<float>(floor + (lr - floor) * 0.5 *
                                        (1.0 + std::cos(M_PI * progress)));
}

absl::StatusOr<double> EvaluateLm(Gpt &model,
                                  const ValidationWindows &windows) {
  const GptConfig &c = model.config();
  if (windows.seq_len() != c.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "validation windows of %d tokens; the model's context is %d",
        windows.seq_len(), c.context));
  }
  std::vector<int32_t> in(c.tokens()), out(c.tokens());
  double loss = 0;
  int64_t tokens = 0;
  for (int64_t first = 0; first < windows.count(); first += c.batch) {
    const int64_t rows = std::min(c.batch, windows.count() - first);
    for (int64_t r = 0; r < rows; ++r) {
      STRATA_RETURN_IF_ERROR(windows.Get(first + r, in.data() + r * c.context,
                                         out.data() + r * c.context));
    }
    STRATA_ASSIGN_OR_RETURN(double sum,
                            model.Evaluate(in.data(), out.data(), rows));
    loss += sum;
    tokens += rows * c.context;
  }
  return loss / std::max<int64_t>(tokens, 1);
}

absl::StatusOr<LmTrainResult> TrainLm(Gpt &model, LmBatcher &batches,
                                      const ValidationWindows &validation,
                                      const LmTrainOptions &options,
                                      const LmProgressFn &on_step,
                                      const LmEvalFn &on_eval) {
  const GptConfig &c = model.config();
  // Sharded, every rank reads the whole global batch and trains its part.
  const int64_t sequences = model.step_sequences();
  if (batches.batch() != sequences || batches.seq_len() != c.context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batches of %d x %d tokens; the model takes %d x %d a step",
        batches.batch(), batches.seq_len(), sequences, c.context));
  }
  if (options.steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d steps: must be at least 1", options.steps));
  }
  if (options.start_step >= options.steps) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "resuming at step %d of a %d-step run: nothing is left to train (a "
        "larger --max-steps changes the learning-rate schedule)",
        options.start_step, options.steps));
  }
  LmTrainResult result;
  // Every step's loss, a resumed run's earlier ones first: final_loss and
  // checkpoints see the whole run.
  std::vector<double> all_losses = options.prior_losses;
  const int64_t step_tokens = sequences * c.context;
  std::vector<int32_t> in(step_tokens), out(step_tokens);
  const auto run_start = std::chrono::steady_clock::now();
  auto evaluate = [&](int64_t step) -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    STRATA_ASSIGN_OR_RETURN(double loss, EvaluateLm(model, validation));
    result.eval_seconds += Since(start);
    result.evals.push_back({.step = step, .val_loss = loss});
    result.val_loss = loss;
    result.val_tokens = validation.count() * validation.seq_len();
    if (on_eval) on_eval(result.evals.back());
    return absl::OkStatus();
  };
  for (int64_t step = std::max<int64_t>(0, options.start_step);
       step < options.steps; ++step) {
    STRATA_RETURN_IF_ERROR(batches.Next(in.data(), out.data()));
    model.SetLearningRate(LmLearningRate(options, c.adam.lr, step));
    const double optimizer_before = model.clip_stats().optimizer_seconds;
    const auto start = std::chrono::steady_clock::now();
    STRATA_ASSIGN_OR_RETURN(double loss,
                            model.TrainStep(in.data(), out.data(), sequences));
    result.step_seconds.push_back(Since(start));
    result.train_seconds += result.step_seconds.back();
    result.optimizer_seconds.push_back(model.clip_stats().optimizer_seconds -
                                       optimizer_before);
    result.losses.push_back(loss / step_tokens);
    all_losses.push_back(result.losses.back());
    result.tokens_per_second =
        double(step_tokens) * result.losses.size() / result.train_seconds;
    if (on_step) {
      on_step({.step = step + 1,
               .steps = options.steps,
               .loss = result.losses.back(),
               .seconds = Since(run_start),
               .tokens_per_second = result.tokens_per_second});
    }
    const bool last = step + 1 == options.steps;
    if (last ||
        (options.eval_every > 0 && (step + 1) % options.eval_every == 0)) {
      STRATA_RETURN_IF_ERROR(evaluate(step + 1));
    }
    if (options.after_step)
      STRATA_RETURN_IF_ERROR(options.after_step(step + 1, all_losses));
  }
  result.final_loss = MeanOfLastTenth(all_losses);
  return result;
}

}  // namespace strata::train
