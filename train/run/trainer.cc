// trainer.cc: the epoch loop (see trainer.h).
#include "train/run/trainer.h"

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

absl::Status CheckData(const Dataset& data, const TrainOptions& o,
                       const char* split) {
  const ModelConfig& c = o.model;
  if (data.features() != c.inputs || data.classes != c.classes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s data has %d features and %d classes; the model takes %d and %d",
        split, data.features(), data.classes, c.inputs, c.classes));
  }
  return absl::OkStatus();
}

}  // namespace

float ScheduledLearningRate(const TrainOptions& options, int64_t step,
                            int64_t total) {
  const float base = options.model.adam.lr;
  if (!options.cosine_schedule || total <= 0) return base;
  const double progress = std::min(1.0, double(step) / double(total));
  return static_cast<float>(base * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

absl::StatusOr<Evaluation> Evaluate(Mlp& model, const Dataset& data,
                                    int64_t batch) {
  if (data.count < 1) {
    return absl::InvalidArgumentError("no samples to evaluate on");
  }
  std::vector<int64_t> order(data.count);
  for (int64_t i = 0; i < data.count; ++i) order[i] = i;
  std::vector<float> images(batch * data.features());
  std::vector<int32_t> labels(batch);
  double loss = 0;
  int64_t correct = 0;
  for (int64_t first = 0; first < data.count; first += batch) {
    const int64_t rows = std::min(batch, data.count - first);
    GatherBatch(data, order, first, rows, images.data(), labels.data());
    STRATA_ASSIGN_OR_RETURN(LossResult r,
                            model.Evaluate(images.data(), labels.data(), rows));
    loss += r.loss_sum;
    correct += r.correct;
  }
  return Evaluation{.accuracy = double(correct) / data.count,
                    .mean_loss = loss / data.count};
}

absl::StatusOr<TrainResult> Train(Mlp& model, const Dataset& train,
                                  const Dataset& test,
                                  const TrainOptions& options,
                                  const ProgressFn& on_step,
                                  const EpochFn& on_epoch) {
  STRATA_RETURN_IF_ERROR(CheckData(train, options, "training"));
  if (options.evaluate) {
    STRATA_RETURN_IF_ERROR(CheckData(test, options, "test"));
  }
  // Samples per optimizer step: the micro-batches of one step together,
  // on every rank of a sharded run.
  const int64_t batch =
      options.model.batch * options.model.accumulate * model.ranks();
  const int64_t steps_per_epoch = train.count / batch;
  if (steps_per_epoch < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--batch=%d x --accumulate=%d x %d ranks is larger than the %d "
        "training samples",
        options.model.batch, options.model.accumulate, model.ranks(),
        train.count));
  }
  if (options.epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--epochs=%d: must be at least 1", options.epochs));
  }
  TrainResult result;
  std::vector<float> images(batch * train.features());
  std::vector<int32_t> labels(batch);
  const auto run_start = std::chrono::steady_clock::now();
  int64_t total_steps = steps_per_epoch * options.epochs;
  if (options.max_steps > 0) {
    total_steps = std::min(total_steps, options.max_steps);
  }
  int64_t step = std::max<int64_t>(0, options.start_step);
  if (step >= total_steps) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "resuming at step %d of a %d-step run: nothing is left to train (a "
        "longer run, e.g. a larger --max-steps or --epochs, changes the "
        "learning-rate schedule)",
        step, total_steps));
  }
  bool stop = false;
  // A resumed run starts inside the epoch the saved one had reached.
  const int first_epoch = static_cast<int>(step / steps_per_epoch) + 1;
  for (int epoch = first_epoch; epoch <= options.epochs && !stop; ++epoch) {
    const std::vector<int64_t> order =
        EpochOrder(train.count, options.shuffle_seed, epoch);
    EpochSummary summary{.epoch = epoch, .steps_per_epoch = steps_per_epoch};
    const int64_t first_step =
        epoch == first_epoch ? step % steps_per_epoch : 0;
    double loss_sum = first_step > 0 ? options.start_epoch_loss_sum : 0;
    int64_t epoch_steps = first_step;  // of the epoch, before the resume too
    const auto epoch_start = std::chrono::steady_clock::now();
    for (int64_t s = first_step; s < steps_per_epoch; ++s) {
      GatherBatch(train, order, s * batch, batch, images.data(), labels.data());
      model.SetLearningRate(ScheduledLearningRate(options, step, total_steps));
      const auto step_start = std::chrono::steady_clock::now();
      const double optimizer_before = model.optimizer_seconds();
      STRATA_ASSIGN_OR_RETURN(
          LossResult r, model.TrainStep(images.data(), labels.data(), batch));
      result.step_seconds.push_back(Since(step_start));
      result.optimizer_seconds.push_back(model.optimizer_seconds() -
                                         optimizer_before);
      const double loss = r.loss_sum / batch;
      result.losses.push_back(loss);
      loss_sum += r.loss_sum;
      ++summary.steps;
      ++epoch_steps;
      ++step;
      if (on_step) {
        on_step({.epoch = epoch,
                 .epochs = options.epochs,
                 .step_in_epoch = s + 1,
                 .steps_per_epoch = steps_per_epoch,
                 .step = step,
                 .loss = loss,
                 .seconds = Since(run_start)});
      }
      if (options.after_step) {
        STRATA_RETURN_IF_ERROR(
            options.after_step({.step = step,
                                .total_steps = total_steps,
                                .epoch_loss_sum = loss_sum}));
      }
      if (options.max_steps > 0 && step >= options.max_steps) {
        stop = true;
        break;
      }
    }
    summary.seconds = Since(epoch_start);
    result.train_seconds += summary.seconds;
    summary.steps_done = epoch_steps;
    summary.mean_loss = loss_sum / (epoch_steps * batch);
    summary.steps_per_second = summary.steps / summary.seconds;
    if (options.evaluate) {
      const auto eval_start = std::chrono::steady_clock::now();
      STRATA_ASSIGN_OR_RETURN(Evaluation e,
                              Evaluate(model, test, options.model.batch));
      result.eval_seconds += Since(eval_start);
      summary.test_accuracy = e.accuracy;
      summary.test_loss = e.mean_loss;
      result.test_accuracy = e.accuracy;
    }
    result.final_loss = summary.mean_loss;
    result.epochs.push_back(summary);
    if (on_epoch) on_epoch(summary);
  }
  return result;
}

}  // namespace strata::train
