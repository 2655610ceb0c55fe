// train_command.cc: `strata train` (see train_command.h): the flags its
// models share and the choice of model (the runs: gpt_train_command.h,
// mlp_train_command.h).
#include "apps/train_command.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "apps/cli/exit_code.h"
#include "apps/cli/gnuplot.h"
#include "apps/cli/output_path.h"
#include "apps/cli/store_flags.h"
#include "apps/cli/train_defaults.h"
#include "apps/distributed_run.h"
#include "apps/gpt_train_command.h"
#include "apps/mlp_train_command.h"
#include "apps/train_flags.h"
#include "strata/status.h"

ABSL_FLAG(std::string, model, "gpt",
          "gpt (a GPT-2 style transformer on the King James Bible; flags "
          "--layers, --heads, --embed, --context, --tokenizer, ...) or mlp "
          "(a deep MLP on Fashion-MNIST; flags --width, --depth, ...).");
ABSL_FLAG(int64_t, batch, 256,
          "Samples per micro-batch, so per step unless --accumulate (gpt: "
          "sequences of --context tokens).");
ABSL_FLAG(int32_t, accumulate, 1,
          "Micro-batches of --batch samples (gpt: sequences) per optimizer "
          "step (gradient accumulation), run layer-major: each weight "
          "crosses the device link once per step however many micro-batches "
          "there are.");
ABSL_FLAG(std::string, checkpoint, "none",
          "Activation checkpointing: none (keep every activation for "
          "backward), block (keep each layer's input, a GPT block's "
          "residual stream, and recompute the rest in backward; the same "
          "losses, bit for bit) or offload (block, and the kept inputs move "
          "to the host tier after forward; not with --resident).");
ABSL_FLAG(int64_t, max_steps, 0,
          "Stop after this many steps in all (then evaluate); 0 = no limit "
          "(gpt: the run's length, >= 1).");
ABSL_FLAG(double, lr, 1e-3, "Adam's peak learning rate (see --lr-schedule).");
ABSL_FLAG(std::string, lr_schedule, "cosine",
          "cosine (decay over the run: to 0 for the MLP, to a tenth of "
          "--lr for the GPT) or constant.");
ABSL_FLAG(uint64_t, seed, 1,
          "Seed of the initial weights and the batch order; "
          "the same seed gives the same losses, bit for bit, whatever the "
          "budgets (gpt: for the same classifier slice, which the device "
          "budget sets; see classifier_rows in the report).");
ABSL_FLAG(std::string, optimizer_tier, "host",
          "Where Adam runs: host (CPU Adam on the host tier, "
          "as ZeRO-Offload) or device.");
ABSL_FLAG(bool, resident, false,
          "Size the device budget to hold every tensor and "
          "run Adam there, so nothing moves but the input batches "
          "(overrides the budget flags and --optimizer-tier); the baseline "
          "an offloaded run must match bit for bit. Not with "
          "--memory=unified.");

namespace strata {
namespace {

// An output refused before the run: bad input, exit code 2.
int Refuse(const absl::Status& status) {
  DistributedRun::AwaitRankZeroRefusal(status);
  std::fprintf(stderr, "strata train: %s\n", ErrorText(status).c_str());
  return 2;
}

}  // namespace

absl::Status CheckTrainOutputs(const std::string& json_path,
                               const std::string& timeline_path,
                               const std::string& plot_path,
                               std::vector<FileFlag> inputs) {
  for (const auto& [path, flag] : {std::pair{json_path, "--json"},
                                   std::pair{timeline_path, "--timeline"}}) {
    STRATA_RETURN_IF_ERROR(CheckWritable(path, flag));
  }
  inputs.push_back({absl::GetFlag(FLAGS_config), "--config"});
  inputs.push_back({absl::GetFlag(FLAGS_machine_profile), "--machine-profile"});
  STRATA_RETURN_IF_ERROR(CheckDistinctFiles({{json_path, "--json"},
                                             {timeline_path, "--timeline"},
                                             {plot_path, "--plot"}},
                                            inputs));
  return CheckPlotOutput(plot_path, "--plot");
}

void ApplyTrainDefaults() {
  SetBudgetDefaults(kTrainDeviceBudget, kTrainHostBudget, kTrainNvmeBudget);
}

int RunTrain(const std::string& json_out, const std::string& timeline_out,
             const std::string& plot_out) {
  std::string json_path = json_out, timeline_path = timeline_out,
              plot_path = plot_out;
  if (absl::Status d = DistributedRun::CheckFlags(); !d.ok()) {
    return Refuse(d);
  }
  if (DistributedRun::Requested()) {
    // Rank 0 writes the files.
    if (DistributedRun::LaunchRank() > 0) {
      json_path.clear();
      timeline_path.clear();
      plot_path.clear();
    }
  }
  const std::string model_name = absl::GetFlag(FLAGS_model);
  if (model_name == "gpt") {
    return RunGptTrain(json_path, timeline_path, plot_path);
  }
  if (model_name != "mlp") {
    DistributedRun::AwaitRankZeroRefusal(absl::InvalidArgumentError("--model"));
    std::fprintf(stderr, "strata train: --model=%s: use gpt or mlp\n",
                 model_name.c_str());
    return 2;
  }
  return RunMlpTrain(json_path, timeline_path, plot_path);
}

}  // namespace strata
