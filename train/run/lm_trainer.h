// lm_trainer.h: the language-model training loop behind `strata train
// --model=gpt` — steps of random token windows through a Gpt, a warm-up then
// cosine learning rate, validation loss every few steps, and the numbers a
// report needs.
#ifndef STRATA_TRAIN_RUN_LM_TRAINER_H_
#define STRATA_TRAIN_RUN_LM_TRAINER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "train/data/lm_batcher.h"
#include "train/model/gpt.h"

namespace strata::train {

struct LmTrainOptions {
  int64_t steps = 100;       // optimizer steps in all
  int64_t warmup_steps = 0;  // linear warm-up from lr/warmup; 0: none
  // Cosine decay after the warm-up to min_lr_fraction x lr at the last step
  // (nanoGPT's schedule); false keeps lr constant after the warm-up.
  bool cosine_schedule = true;
  float min_lr_fraction = 0.1f;
  int64_t eval_every = 0;  // validation every N steps (and at the end); 0: end
  uint64_t seed = 1;       // batch order
  // Resuming: the steps already done by a run with the same options (the
  // batcher and the model restored to that point); the run goes on at the
  // next step of the same schedule. Default: 0, a fresh run.
  int64_t start_step = 0;
  // Resuming: the per-step losses of those start_step steps, so that
  // final_loss (the mean of the run's last tenth) is the uninterrupted
  // run's. Default: none.
  std::vector<double> prior_losses;
  // Called after each step (and its evaluation), outside BeginStep/EndStep,
  // with the steps done and every step's loss so far (prior_losses first; a
  // checkpoint is saved there); an error stops the run with it. Default:
  // none.
  std::function<absl::Status(int64_t step, absl::Span<const double> losses)>
      after_step;
};

// The learning rate of step `step` (from 0) for peak `lr`.
float LmLearningRate(const LmTrainOptions &o, float lr, int64_t step);

struct LmEval {
  int64_t step = 0;  // steps done when it ran
  double val_loss = 0;
};

struct LmTrainResult {
  std::vector<double> losses;        // mean loss per token of every step
  std::vector<double> step_seconds;  // wall time of every step
  // Host seconds of each step in the optimizer (updates, backups, restores).
  std::vector<double> optimizer_seconds;
  std::vector<LmEval> evals;
  double val_loss = 0;           // the last evaluation's
  int64_t val_tokens = 0;        // tokens each evaluation scores
  double final_loss = 0;         // mean of the last tenth of the steps' losses
  double tokens_per_second = 0;  // training tokens over training time
  double train_seconds = 0;      // steps only
  double eval_seconds = 0;
};

struct LmProgress {
  int64_t step = 0;  // from 1
  int64_t steps = 0;
  double loss = 0;
  double seconds = 0;  // since the run began
  double tokens_per_second = 0;
};
using LmProgressFn = std::function<void(const LmProgress &)>;
using LmEvalFn = std::function<void(const LmEval &)>;

// Mean loss per token of `model` on every window of `windows`, `batch`
// windows per forward pass.
absl::StatusOr<double> EvaluateLm(Gpt &model, const ValidationWindows &windows);

// Trains `model` for options.steps on `batches` and evaluates on
// `validation`. The callbacks may be empty. Errors: InvalidArgument when the
// batcher's shape is not the model's; the model's and the reader's errors.
absl::StatusOr<LmTrainResult> TrainLm(Gpt &model, LmBatcher &batches,
                                      const ValidationWindows &validation,
                                      const LmTrainOptions &options,
                                      const LmProgressFn &on_step = {},
                                      const LmEvalFn &on_eval = {});

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_LM_TRAINER_H_
