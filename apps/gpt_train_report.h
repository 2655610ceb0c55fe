// gpt_train_report.h: what `strata train --model=gpt` shows and writes of a
// run — the progress line, the sample of generated text, the result table,
// the --json report and the --plot data.
#ifndef STRATA_APPS_GPT_TRAIN_REPORT_H_
#define STRATA_APPS_GPT_TRAIN_REPORT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "apps/cli/train_plot.h"
#include "strata/stats.h"
#include "strata/store.h"
#include "train/data/lm_corpus.h"
#include "train/model/gpt.h"
#include "train/run/lm_trainer.h"

namespace strata {

// The progress line: redrawn in place on a terminal (`tty`), every
// twentieth of the run otherwise.
void PrintGptProgress(const train::LmProgress& p, bool tty);

// Samples `count` tokens after the first window of the validation split
// (temperature 1, SplitMix64 from `seed`), one forward pass per token; sets
// `prompt` to that window. Both texts show control bytes other than newline
// and tab as '?'.
absl::StatusOr<std::string> SampleGpt(train::Gpt& gpt,
                                      const train::LmCorpus& corpus,
                                      int64_t count, uint64_t seed,
                                      std::string* prompt);

// The --json report of a finished run: the losses against the bigram
// `baseline`, the model, the corpus, the flags as given and as resolved
// (`options`: the run's schedule; `s`: the store's), the store's counters
// `st` and the bytes each link moved per parameter and step.
nlohmann::json GptReportJson(const train::LmTrainOptions& options,
                             const StoreOptions& s, train::Gpt& gpt,
                             const train::LmTrainResult& r, double baseline,
                             const train::LmCorpus& corpus, const Stats& st,
                             const std::string& compute);

// The printed table of the same.
void PrintGptTable(train::Gpt& gpt, const train::LmTrainResult& r,
                   double baseline, const Stats& st);

// The plot of the run: loss per step, validation loss per evaluation, bytes
// per step.
TrainPlotData GptPlotData(const train::GptConfig& m,
                          const train::LmTrainResult& r,
                          const LinkBytesPerStep& moved);

}  // namespace strata

#endif  // STRATA_APPS_GPT_TRAIN_REPORT_H_
