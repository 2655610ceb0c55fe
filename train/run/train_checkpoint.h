// train_checkpoint.h: what a checkpoint of each reference model holds, and
// resuming one — the glue between the training loops (trainer.h,
// lm_trainer.h) and the checkpoint files (checkpoint_writer.h,
// checkpoint_reader.h).
//
// MLP: every layer's weight, bias and Adam moments; the steps done (Adam's
// bias corrections; the epoch, the position in it and so the batch order,
// which EpochOrder derives from the seed and the epoch; the learning-rate
// schedule's position) and the epoch's loss so far.
// GPT: every parameter and its AdamW moments; the steps done (bias
// corrections, schedule, evaluations), the batcher's SplitMix64 state (the
// data position), ClippedAdamW's clean-step count (deferred or speculative
// updates) and its counters.
// Both save the configuration that decides the model and the math; resuming
// refuses another model or shape, and warns about other differences (a
// resumed run then no longer matches the uninterrupted one bit for bit).
#ifndef STRATA_TRAIN_RUN_TRAIN_CHECKPOINT_H_
#define STRATA_TRAIN_RUN_TRAIN_CHECKPOINT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/store.h"
#include "train/data/lm_batcher.h"
#include "train/io/checkpoint_writer.h"
#include "train/model/gpt.h"
#include "train/model/model.h"
#include "train/run/lm_trainer.h"
#include "train/run/trainer.h"

namespace strata::train {

// The MLP's effective configuration, flag name -> value.
std::map<std::string, std::string> MlpCheckpointConfig(const TrainOptions& o);

// A checkpoint of `model` trained with `options`, after `done`.
CheckpointContent MlpCheckpoint(const Mlp& model, const TrainOptions& options,
                                const StepDone& done);

// What a resume found: the checkpoint, its step, and the configuration
// differences that do not stop it (one line each, for a warning).
struct Resumed {
  std::string path;
  int64_t step = 0;
  std::vector<std::string> warnings;
};

// Restores the newest complete checkpoint at `path` (a --save-dir or one
// step directory) into `model` and sets options.start_step and
// start_epoch_loss_sum. Errors: NotFound (no checkpoint there);
// InvalidArgument (another model or shape: the message lists what differs);
// DataLoss (a damaged checkpoint, naming the file and tensor); the store's.
absl::StatusOr<Resumed> ResumeMlp(const std::string& path, Store& store,
                                  Mlp& model, TrainOptions& options);

// The GPT's effective configuration; `tokenizer` is LmCorpusOptions'.
std::map<std::string, std::string> GptCheckpointConfig(
    const GptConfig& model, const LmTrainOptions& options,
    const std::string& tokenizer);

// A checkpoint of `model` after `step` steps, `batches` having drawn them;
// `losses`: every step's loss so far (LmTrainOptions::after_step's).
CheckpointContent GptCheckpoint(const Gpt& model, const LmTrainOptions& options,
                                const std::string& tokenizer,
                                const LmBatcher& batches, int64_t step,
                                absl::Span<const double> losses);

// A sharded GPT rank's checkpoint records each parameter's whole shape in
// its state as kWholeShapePrefix + name = ShapeText(shape) ("301x128"):
// its tensors are flat shards, which an export puts back together.
inline constexpr char kWholeShapePrefix[] = "whole_shape.";
std::string ShapeText(const std::vector<int64_t>& shape);

// As ResumeMlp, for the GPT: restores `model` and `batches` and sets
// options.start_step.
absl::StatusOr<Resumed> ResumeGpt(const std::string& path, Store& store,
                                  Gpt& model, LmBatcher& batches,
                                  LmTrainOptions& options,
                                  const std::string& tokenizer);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_TRAIN_CHECKPOINT_H_
