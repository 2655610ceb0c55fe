// strata: the command line. `strata <command> [flags]`; see kUsage.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "apps/bench_command.h"
#include "apps/checkpoint_command.h"
#include "apps/info_command.h"
#include "apps/store_flags.h"
#include "apps/train_command.h"
#include "base/byte_size.h"

ABSL_FLAG(std::string, bench_case, "",
          "strata bench: run the cases whose name starts with this (also -t "
          "NAME); empty runs every case.");
ABSL_FLAG(bool, list, false,
          "strata bench: list the cases, and why one does not apply here, and "
          "exit.");
ABSL_FLAG(std::string, profile, "",
          "strata bench: write the machine profile (link GB/s per direction "
          "and size, the best NVMe block size and queue depth) to this JSON "
          "file; other commands load it with --machine-profile.");
ABSL_FLAG(std::string, plot, "",
          "strata bench: draw NVMe bandwidth against block size (the "
          "nvme-sweep case) into this PNG file with gnuplot.");
ABSL_FLAG(strata::ByteSize, bench_size, strata::ByteSize{256 * strata::kMiB},
          "strata bench: bytes each NVMe pass reads and writes (the "
          "directory needs this much free space), and the size of the "
          "link-um case's managed buffer.");
ABSL_FLAG(bool, quick, false,
          "strata bench: tiny sizes and few samples, a smoke test of every "
          "case in seconds (the numbers mean little).");
ABSL_FLAG(std::string, timeline, "",
          "strata bench and train: write the timeline of transfers and leases "
          "as Chrome trace-event JSON (open in Perfetto) to this file.");
ABSL_FLAG(std::string, json, "",
          "Also write the report as JSON to this file (--json=FILE).");

namespace {

constexpr char kUsage[] = R"(a tiered tensor store (GPU / pinned host / NVMe).

Usage: strata <command> [flags]

Commands:
  train   The main job: train a deep MLP on Fashion-MNIST with every weight,
          gradient, Adam moment and activation in the store, its state
          several times the device budget (spilling to host and NVMe); prints
          loss, test accuracy and what moved (--json=FILE, --timeline=FILE).
          --model=gpt trains a GPT-2 style language model on the King James
          Bible instead (its flags: --layers, --heads, --embed, --context,
          --tokenizer, --vocab, --corpus, ...; its own budget defaults
          7.5MiB/24MiB/512MiB); prints validation loss against a bigram
          baseline, --sample=N generates text.
          --save-dir=DIR [--save-every=N] [--keep=2] saves checkpoints;
          --resume=DIR continues from the newest one, bit for bit.
  export  strata export CHECKPOINT --safetensors=FILE: the checkpoint's
          parameters as a .safetensors file (for PyTorch).
  info    Show the tiers strata finds here (device backend and why, host
          budget, NVMe files and I/O engine) and run a short round trip of one
          tensor through host -> NVMe -> device -> host.
  bench   Measure each tier link here: host<->device (pinned, pageable,
          device-local; managed memory on a GPU: link-um), the store's NVMe
          path next to fio, NVMe->device, a block size x queue depth sweep,
          the scheduler, explicit copies vs unified memory (unified). -t NAME
          selects by exact name or prefix, --list says which cases apply,
          --json=FILE, --profile=FILE (load with --machine-profile),
          --plot=FILE.png, --quick for a smoke test.

Flags accept --name=value or --name value; dashes and underscores are the same
(--device-budget = --device_budget). Sizes take units: 64MiB, 2GiB.
Examples:
  strata train
  strata train --width=4096 --depth=16 --device-budget=256MiB \
      --host-budget=1GiB --nvme-budget=5GiB --max-steps=8 --lr=2e-5 \
      --lr-schedule=constant   (3.8 GiB of state; deep wide nets need a low lr)
  strata train --resident --max-steps=50 --json=resident.json
  strata train --model=gpt --sample=60 --json=gpt.json
  strata train --memory=unified --max-steps=50   (prefetch hints, same losses)
  strata info
  strata info --device=simulated --nvme-dir=/mnt/nvme0,/mnt/nvme1 --json=info.json
  strata bench -t scheduler --json=scheduler.json
)";

// absl flags are spelled with underscores; accept the dashed spelling too.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>& storage) {
  storage.clear();
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-t" && i + 1 < argc) {  // strata bench -t NAME
      storage.push_back(std::string("--bench_case=") + argv[++i]);
    } else if (arg.rfind("-t=", 0) == 0) {  // strata bench -t=NAME
      storage.push_back("--bench_case=" + arg.substr(3));
    } else {
      storage.push_back(arg);
    }
  }
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& arg : storage) out.push_back(arg.data());
  return out;
}

// True for --help, -h or `help`: then print the usage and every strata flag
// and exit 0 (absl's own --help exits 1 and lists its internal flags).
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help" ||
        arg == "--helpshort") {
      return true;
    }
  }
  return false;
}

// The command, before flags are parsed: the first argument that is not a
// flag (flags here are --name=value; -t takes a value).
std::string FirstPositional(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-t") {
      ++i;
    } else if (arg.empty() || arg[0] != '-') {
      return arg;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (WantsHelp(argc, argv)) {
    absl::flags_internal::SetProgramInvocationName("strata");
    absl::flags_internal::FlagsHelp(
        std::cout, "apps/", absl::flags_internal::HelpFormat::kHumanReadable,
        kUsage);
    return 0;
  }
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return file.find("apps/") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(config);
  if (FirstPositional(argc, argv) == "train") strata::ApplyTrainDefaults();
  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, storage);
  strata::RecordGivenFlags(storage);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() < 2) {
    std::fputs(kUsage, stderr);
    std::fputs("\nRun `strata --help` for every flag.\n", stderr);
    return 2;
  }
  const std::string command = positional[1];
  if (command == "export") {
    return strata::RunExport(positional.size() > 2 ? positional[2] : "");
  }
  if (positional.size() > 2) {
    std::fprintf(
        stderr,
        "strata %s: unexpected argument '%s' (flags are --name=value)\n",
        command.c_str(), positional[2]);
    return 2;
  }
  if (command == "train") {
    return strata::RunTrain(absl::GetFlag(FLAGS_json),
                            absl::GetFlag(FLAGS_timeline));
  }
  if (command == "info") return strata::RunInfo(absl::GetFlag(FLAGS_json));
  if (command == "bench") {
    absl::StatusOr<strata::StoreOptions> options =
        strata::StoreOptionsFromFlags();
    if (!options.ok()) {
      std::fprintf(stderr, "strata bench: %s\n",
                   options.status().ToString().c_str());
      return 2;
    }
    strata::BenchRequest request{
        .selector = absl::GetFlag(FLAGS_bench_case),
        .list = absl::GetFlag(FLAGS_list),
        .json_path = absl::GetFlag(FLAGS_json),
        .timeline_path = absl::GetFlag(FLAGS_timeline),
        .profile_path = absl::GetFlag(FLAGS_profile),
        .plot_path = absl::GetFlag(FLAGS_plot),
        .store = *options,
        .nvme_bytes = absl::GetFlag(FLAGS_bench_size).bytes,
        .quick = absl::GetFlag(FLAGS_quick)};
    return strata::RunBench(request);
  }
  std::fprintf(stderr, "strata: unknown command '%s'\n\n%s", command.c_str(),
               kUsage);
  return 2;
}
