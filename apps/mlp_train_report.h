// mlp_train_report.h: what `strata train --model=mlp` shows and writes of a
// run — the progress line, the result table, the --json report and the
// --plot data.
#ifndef STRATA_APPS_MLP_TRAIN_REPORT_H_
#define STRATA_APPS_MLP_TRAIN_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "apps/cli/train_plot.h"
#include "strata/stats.h"
#include "strata/store.h"
#include "train/model/footprint.h"
#include "train/model/model.h"
#include "train/run/trainer.h"

namespace strata {

// The progress line: redrawn in place on a terminal, every quarter epoch
// otherwise (logs stay short).
class MlpProgressLine {
 public:
  // `shown`: false on ranks other than 0.
  explicit MlpProgressLine(bool shown);
  void Update(const train::Progress& p);
  // Clears the line on a terminal, before other output.
  void Clear();

 private:
  bool shown_;  // false on ranks other than 0
  bool tty_;
};

// The --json report of a finished run: accuracy and losses, the model's
// footprint `f`, the flags as given and as resolved (`t`: the run's; `s`:
// the store's), every epoch and the store's counters `st`.
nlohmann::json MlpReportJson(const train::TrainOptions& t,
                             const StoreOptions& s,
                             const train::ModelFootprint& f,
                             const train::TrainResult& r, const Stats& st,
                             const std::string& compute);

// What gradient accumulation and activation checkpointing did: the modes,
// peak activation bytes, recompute time, bytes per parameter and step.
nlohmann::json MlpTrainingModesJson(const train::Mlp& model,
                                    const train::TrainOptions& t,
                                    const train::TrainResult& r);

// The printed table of the run.
void PrintMlpTable(const train::ModelFootprint& f, const train::TrainResult& r,
                   const Stats& st, const train::Mlp& model,
                   const train::TrainOptions& t);

// The plot of the run: loss per step, test loss per epoch, bytes per step.
TrainPlotData MlpPlotData(const train::TrainOptions& t,
                          const train::TrainResult& r,
                          const LinkBytesPerStep& moved);

}  // namespace strata

#endif  // STRATA_APPS_MLP_TRAIN_REPORT_H_
