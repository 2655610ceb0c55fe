// command_table.cc: the flags of each command (see command_table.h). A flag
// added to apps/ must be placed here too; cli_test fails until it is.
#include "apps/cli/command_table.h"

#include <algorithm>

#include "apps/cli/train_defaults.h"
#include "base/byte_size.h"

namespace strata {
namespace {

constexpr char kTiers[] = "budgets and tiers";
constexpr char kScheduler[] = "scheduler";
constexpr char kMemory[] = "memory mode";
constexpr char kOutput[] = "output";

std::string Size(uint64_t bytes) { return AbslUnparseFlag(ByteSize{bytes}); }

// The store's flags, shared by every command that opens a store; `device`,
// `host` and `nvme` are the budget defaults when the command has its own.
std::vector<FlagEntry> StoreFlags(const std::string& device = "",
                                  const std::string& host = "",
                                  const std::string& nvme = "") {
  return {
      {"device", kTiers, "auto|cuda|simulated"},
      {"device_budget", kTiers, "SIZE", ModelScope::kAll, device},
      {"host_budget", kTiers, "SIZE", ModelScope::kAll, host},
      {"nvme_budget", kTiers, "SIZE", ModelScope::kAll, nvme},
      {"nvme_dir", kTiers, "DIR[,DIR...]"},
      {"io_engine", kTiers, "auto|io_uring|threads"},
      {"queue_depth", kTiers, "N"},
      {"block_size", kTiers, "SIZE"},
      {"machine_profile", kTiers, "FILE"},
      {"sim_link_gbps", kTiers, "GBPS"},
      {"sim_latency_us", kTiers, "US"},
      {"sim_memory", kTiers, "SIZE"},
      {"prefetch", kScheduler, ""},
      {"eviction", kScheduler, "belady|lru"},
      {"scheduler", kScheduler, "planned|reactive"},
      {"memory", kMemory, "copies|unified"},
      {"unified_hints", kMemory, ""},
  };
}

// "7.5MiB; mlp: 16MiB": train's budget default (the GPT's, the default
// model), and the MLP's if other.
std::string TrainBudget(uint64_t mlp, uint64_t gpt) {
  return mlp == gpt ? Size(gpt) : Size(gpt) + "; mlp: " + Size(mlp);
}

std::vector<FlagEntry> TrainFlags() {
  using enum ModelScope;
  const std::string mlp = "; mlp: ";
  std::vector<FlagEntry> flags = {
      {"model", "model", "gpt|mlp"},
      {"width", "model", "N", kMlp},
      {"depth", "model", "N", kMlp},
      {"activation", "model", "relu|gelu", kMlp},
      {"layers", "model", "N", kGpt},
      {"heads", "model", "N", kGpt},
      {"embed", "model", "N", kGpt},
      {"context", "model", "N", kGpt},
      {"vocab", "model", "N", kGpt},
      {"data_dir", "data", "DIR", kMlp},
      {"corpus", "data", "FILE", kGpt},
      {"tokenizer", "data", "byte|bpe", kGpt},
      {"cache_dir", "data", "DIR", kGpt},
      {"batch", "training", "N", kAll, std::to_string(kGptBatch) + mlp + "256"},
      {"accumulate", "training", "N", kAll},
      {"checkpoint", "training", "none|block|offload"},
      {"precision", "training", "fp32|bf16|fp16", kAll},
      {"rounding", "training", "nearest|stochastic", kAll},
      {"loss_scale", "training", "X", kAll},
      {"epochs", "training", "N", kMlp},
      {"max_steps", "training", "N", kAll,
       std::to_string(kGptSteps) + mlp + "0"},
      {"lr", "training", "X", kAll, "0.003" + mlp + "0.001"},
      {"lr_schedule", "training", "cosine|constant"},
      {"warmup_steps", "training", "N", kGpt},
      {"weight_decay", "training", "X", kGpt},
      {"grad_clip", "training", "X", kGpt},
      {"seed", "training", "N"},
      {"optimizer_tier", "training", "host|device"},
      {"resident", "training", ""},
      {"eval_every", "training", "N", kGpt},
      {"eval_tokens", "training", "N", kGpt},
      // Checkpoints (apps/checkpoint_command.cc, where it is built in; an
      // entry whose flag is not defined is skipped everywhere).
      {"save_dir", "checkpoints", "DIR"},
      {"save_every", "checkpoints", "N"},
      {"keep", "checkpoints", "N"},
      {"resume", "checkpoints", "DIR"},
      // Sharded data parallelism over MPI (apps/distributed_run.cc).
      {"distributed", "distributed", ""},
      {"collective_timeout", "distributed", "SECONDS"},
  };
  for (FlagEntry& e :
       StoreFlags(TrainBudget(kTrainDeviceBudget, kGptDeviceBudget),
                  TrainBudget(kTrainHostBudget, kGptHostBudget),
                  TrainBudget(kTrainNvmeBudget, kGptNvmeBudget))) {
    flags.push_back(std::move(e));
  }
  const std::vector<FlagEntry> output = {
      {"json", kOutput, "FILE"},
      {"timeline", kOutput, "FILE"},
      {"plot", kOutput, "FILE.png", kAll, "",
       "Draw the training loss per step (and the test or validation figure "
       "per evaluation) and the bytes moved per step on each link into this "
       "PNG file with gnuplot."},
      {"sample", kOutput, "N", kGpt},
      {"config", kOutput, "FILE.json"},
  };
  flags.insert(flags.end(), output.begin(), output.end());
  return flags;
}

std::vector<FlagEntry> BenchFlags() {
  std::vector<FlagEntry> flags = {
      {"bench_case", "cases", "NAME"},
      {"list", "cases", ""},
      {"quick", "cases", ""},
      {"bench_size", "cases", "SIZE"},
  };
  // Each case sizes its own store (the NVMe cases to --bench-size), so the
  // tier budgets are not bench's flags: given, they are refused rather than
  // ignored.
  for (FlagEntry& e : StoreFlags()) {
    if (!std::string_view(e.name).ends_with("_budget")) {
      flags.push_back(std::move(e));
    }
  }
  const std::vector<FlagEntry> output = {
      {"json", kOutput, "FILE"},
      {"profile", kOutput, "FILE"},
      {"plot", kOutput, "FILE.png", ModelScope::kAll, "",
       "Draw NVMe bandwidth against block size (the nvme-sweep case) into "
       "this PNG file with gnuplot."},
      {"timeline", kOutput, "FILE"},
      {"config", kOutput, "FILE.json"},
  };
  flags.insert(flags.end(), output.begin(), output.end());
  return flags;
}

std::vector<FlagEntry> InfoFlags() {
  std::vector<FlagEntry> flags = StoreFlags();
  flags.push_back({"json", kOutput, "FILE"});
  flags.push_back({"config", kOutput, "FILE.json"});
  return flags;
}

std::vector<FlagEntry> ScaleFlags() {
  return {
      {"ranks", "scale", "N[,N...]"},
      {"shapes", "scale", "gpt2-xl|gpt3-175b|1t|32t"},
      {"tokens_per_rank", "scale", "N"},
      {"micro_batches", "scale", "N"},
      {"ranks_per_node", "scale", "N"},
      {"intra_node_gbps", "scale", "GBPS"},
      {"rank_device", "scale", "SIZE"},
      {"rank_host", "scale", "SIZE"},
      {"rank_nvme", "scale", "SIZE"},
      {"device_tflops", "scale", "TFLOPS"},
      {"net_gbps", "scale", "GBPS"},
      {"net_latency_us", "scale", "US"},
      {"host_adam_gps", "scale", "GPARAMS"},
      {"machine_profile", "scale", "FILE", ModelScope::kAll, "",
       "Take the host<->device and NVMe bandwidths from a machine profile "
       "`strata bench --profile=FILE` measured (without one: the H200's "
       "pinned copies measured in bench/gpu_check.sh, 53.4/53.7 GB/s, and "
       "this development machine's NVMe, 3.8/8.0 GB/s)."},
      {"json", kOutput, "FILE"},
      {"config", kOutput, "FILE.json"},
  };
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec> commands = {
      {"train",
       "train a model whose every tensor lives in the store (--model=gpt|mlp)",
       "The main job: train a GPT-2 style language model on the King James "
       "Bible (--model=gpt, the default) or a deep MLP on Fashion-MNIST "
       "(--model=mlp), "
       "every weight, gradient, Adam moment and activation in the store, its "
       "state several times the device budget (spilling to host and NVMe). "
       "Prints the loss, the test accuracy or validation loss, and what "
       "moved. Flags marked (mlp) or (gpt) apply to that model only.",
       "[flags]", TrainFlags()},
      {"info", "show the tiers found here and move one tensor through them",
       "Show the tiers strata finds here (device backend and why, host "
       "budget, NVMe files and I/O engine) and run a short round trip of one "
       "tensor through host -> NVMe -> device -> host.",
       "[flags]", InfoFlags()},
      {"bench", "measure each tier link here (-t NAME selects cases)",
       "Measure each tier link here: host<->device, the store's NVMe path "
       "next to fio, NVMe->device, a block size x queue depth sweep, the "
       "scheduler, explicit copies vs unified memory. -t NAME selects cases "
       "by exact name or prefix; --list says which apply here.",
       "[flags]", BenchFlags()},
      {"export",
       "write a checkpoint's parameters as .safetensors",
       "Write the parameters of a checkpoint (a step directory that "
       "`strata train --save-dir` wrote, or the save dir: its newest; a "
       "--distributed run's save dir: its ranks' shards of the newest step "
       "every rank saved, gathered into whole tensors) as a .safetensors "
       "file, tensor names as in its manifest, so PyTorch users can load "
       "strata-trained weights.",
       "CHECKPOINT [flags]",
       {{"safetensors", kOutput, "FILE"}}},
      {"scale", "estimate sharded training on N ranks, on paper (ZeRO-3 model)",
       "Estimate ZeRO-3-style sharded data parallelism on N ranks, on "
       "paper: per-rank memory on each tier, bytes communicated, moved over "
       "the host<->device link and NVMe, and the step time they imply "
       "(every transfer overlapped, and none), for transformer shapes from "
       "GPT-2 XL to 32T parameters, from one rank's profile (tier sizes and "
       "rates from the flags, links from --machine-profile); then "
       "ZeRO-Infinity's published figures next to the model on its DGX-2 "
       "testbed. The model and what it leaves out: train/run/scale_model.h.",
       "[flags]", ScaleFlags()},
      {"help",
       "show help: `strata help <command>` (also --help)",
       "Show the commands, or a command's flags: strata help <command>. "
       "strata help --markdown prints every page as the command reference "
       "(docs/cli.md).",
       "[command]",
       {}},
      {"completion",
       "print the bash completion script: strata completion bash",
       "Print the bash completion script (commands, each command's flags, the "
       "values of choice flags): source <(strata completion bash). "
       "`cmake --install` installs it to share/bash-completion/completions.",
       "bash",
       {}},
  };
  return commands;
}

const CommandSpec* FindCommand(std::string_view name) {
  for (const CommandSpec& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

const FlagEntry* FindFlagEntry(const CommandSpec& command,
                               std::string_view name) {
  for (const FlagEntry& e : command.flags) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

const std::vector<const char*>& FlagGroups() {
  static const std::vector<const char*> groups = {
      "model", "data", "training", "checkpoints", "distributed", "cases",
      "scale", kTiers, kScheduler, kMemory,       kOutput};
  return groups;
}

std::string Dashed(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

}  // namespace strata
