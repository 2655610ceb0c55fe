// gpt_train_command.h: `strata train --model=gpt` — a GPT-2 style language
// model on the King James Bible (or --corpus=FILE) whose every tensor lives in
// the store, with validation loss against a bigram baseline, a sample of
// generated text and a report of what moved.
#ifndef STRATA_APPS_GPT_TRAIN_COMMAND_H_
#define STRATA_APPS_GPT_TRAIN_COMMAND_H_

#include <string>

namespace strata {

// Runs the GPT from the parsed flags (model defaults for the shared flags the
// command line left unset), writing the JSON report, the timeline and the
// plot where the paths are non-empty; returns the exit code (0 ok, 1
// failed, 2 bad flags).
int RunGptTrain(const std::string& json_path, const std::string& timeline_path,
                const std::string& plot_path);

}  // namespace strata

#endif  // STRATA_APPS_GPT_TRAIN_COMMAND_H_
