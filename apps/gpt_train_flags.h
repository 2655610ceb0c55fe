// gpt_train_flags.h: the GPT's side of `strata train`'s flags — its defaults
// for the flags it shares with the MLP, and the run its own flags (defined
// in gpt_train_flags.cc) describe, checked.
#ifndef STRATA_APPS_GPT_TRAIN_FLAGS_H_
#define STRATA_APPS_GPT_TRAIN_FLAGS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "train/data/lm_corpus.h"
#include "train/model/gpt.h"
#include "train/run/lm_trainer.h"

namespace strata {

// The GPT's defaults (train_defaults.h) for the flags it shares with the
// MLP, where the command line (or --config) leaves them unset.
void ApplyGptDefaults();

// A GPT run as the flags describe it.
struct GptRun {
  train::GptConfig model;
  train::LmTrainOptions train;
  train::LmCorpusOptions corpus;
  int64_t eval_tokens = 0;  // validation tokens per evaluation; 0: all
  int64_t sample = 0;       // tokens generated after training
};

// The run from the flags; InvalidArgument naming the first flag whose value
// is refused (the model's shape is checked later: ComputeGptFootprint).
absl::StatusOr<GptRun> GptRunFromFlags();

}  // namespace strata

#endif  // STRATA_APPS_GPT_TRAIN_FLAGS_H_
