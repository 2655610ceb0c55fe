// trainer.h: the training loop behind `strata train` — epochs of shuffled
// batches through an Mlp, test accuracy after each epoch, and the numbers a
// report needs.
#ifndef STRATA_TRAIN_RUN_TRAINER_H_
#define STRATA_TRAIN_RUN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/compute/compute.h"
#include "train/data/dataset.h"
#include "train/model/model.h"

namespace strata::train {

// Where a run stands after a step, for a checkpoint.
struct StepDone {
  int64_t step = 0;         // steps done, from 1
  int64_t total_steps = 0;  // of the whole run
  // Summed loss of the samples trained on so far in this step's epoch.
  double epoch_loss_sum = 0;
};

struct TrainOptions {
  ModelConfig model;
  int epochs = 5;         // passes over the training set
  int64_t max_steps = 0;  // stop after this many steps in all; 0: no limit
  // Evaluate on the test set after each epoch (and when max_steps stops the
  // run). Default: true.
  bool evaluate = true;
  uint64_t shuffle_seed = 1;  // batch order; the same seed, the same order
  // Cosine decay of the learning rate from model.adam.lr to 0 over the run
  // (Loshchilov & Hutter, 2017, without restarts); false keeps it constant.
  // Default: true.
  bool cosine_schedule = true;
  // Resuming: the steps already done (by a run with the same options) and
  // that run's StepDone::epoch_loss_sum then; the run goes on at the next
  // step of the same schedule and batch order. Default: 0, a fresh run.
  int64_t start_step = 0;
  double start_epoch_loss_sum = 0;
  // Called after each step, outside BeginStep/EndStep (a checkpoint is
  // saved there); an error stops the run with it. Default: none.
  std::function<absl::Status(const StepDone&)> after_step;
};

// The learning rate of step `step` (from 0) of a `total`-step run.
float ScheduledLearningRate(const TrainOptions& options, int64_t step,
                            int64_t total);

struct EpochSummary {
  int epoch = 0;      // from 1
  int64_t steps = 0;  // steps run in this epoch (by this run)
  // Steps of the epoch done, before a resume too (what mean_loss covers),
  // and the steps a whole epoch has: fewer when the run stopped inside it.
  int64_t steps_done = 0;
  int64_t steps_per_epoch = 0;
  double mean_loss = 0;      // mean training loss over the epoch's samples
  double test_accuracy = 0;  // fraction of test samples right (if evaluated)
  double test_loss = 0;      // mean test loss (if evaluated)
  double seconds = 0;        // training time, evaluation excluded
  double steps_per_second = 0;
};

struct TrainResult {
  std::vector<double> losses;        // mean loss of every step, in order
  std::vector<double> step_seconds;  // wall time of every step
  // Host seconds of every step spent in Adam's updates
  // (Mlp::optimizer_seconds).
  std::vector<double> optimizer_seconds;
  std::vector<EpochSummary> epochs;
  double test_accuracy = 0;  // after the last epoch (or the last step)
  double final_loss = 0;     // mean training loss of the last epoch
  double train_seconds = 0;  // all steps, evaluation excluded
  double eval_seconds = 0;
};

// Where a run is, for a progress line.
struct Progress {
  int epoch = 0;  // from 1
  int epochs = 0;
  int64_t step_in_epoch = 0;  // from 1
  int64_t steps_per_epoch = 0;
  int64_t step = 0;    // from 1, over the whole run
  double loss = 0;     // this step's
  double seconds = 0;  // since the run began
};
using ProgressFn = std::function<void(const Progress&)>;
using EpochFn = std::function<void(const EpochSummary&)>;

// Trains `model` on `train` for options.epochs (drops each epoch's last
// partial batch) and evaluates on `test`. `on_step` and `on_epoch` may be
// empty. Errors: InvalidArgument when the data does not match the model
// (features, classes, fewer samples than one batch); the model's errors.
absl::StatusOr<TrainResult> Train(Mlp& model, const Dataset& train,
                                  const Dataset& test,
                                  const TrainOptions& options,
                                  const ProgressFn& on_step = {},
                                  const EpochFn& on_epoch = {});

// Loss and accuracy of `model` on every sample of `data`, in batches.
struct Evaluation {
  double accuracy = 0;
  double mean_loss = 0;
};
absl::StatusOr<Evaluation> Evaluate(Mlp& model, const Dataset& data,
                                    int64_t batch);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_TRAINER_H_
