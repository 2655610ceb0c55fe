// strata: the command line. `strata <command> [flags]`: the command's flags
// are checked against its table (apps/cli/command_table.h), a --config file's
// flags set first and the command line's after them, then the command runs.
// Exit codes: 0 success, 1 a failure while running, 2 bad input.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "apps/bench/bench_command.h"
#include "apps/build_info.h"
#include "apps/checkpoint_command.h"
#include "apps/cli/bash_completion.h"
#include "apps/cli/cli_reference.h"
#include "apps/cli/command_help.h"
#include "apps/cli/command_line.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "apps/cli/flag_suggest.h"
#include "apps/cli/store_flags.h"
#include "apps/distributed_run.h"
#include "apps/info_command.h"
#include "apps/scale_command.h"
#include "apps/train_command.h"
#include "base/byte_size.h"
#include "strata/status.h"

ABSL_FLAG(std::string, bench_case, "",
          "Run the case of this name, or the cases whose name starts with "
          "it (also -t NAME); empty runs every case.");
ABSL_FLAG(bool, list, false,
          "List the cases, and why one does not apply here, and exit.");
ABSL_FLAG(std::string, profile, "",
          "Write the machine profile (link GB/s per direction "
          "and size, the best NVMe block size and queue depth) to this JSON "
          "file; other commands load it with --machine-profile.");
ABSL_FLAG(std::string, plot, "",
          "Draw the run into this PNG file with gnuplot (bench: NVMe "
          "bandwidth against block size; train: loss and bytes moved per "
          "step).");
ABSL_FLAG(strata::ByteSize, bench_size, strata::ByteSize{256 * strata::kMiB},
          "Bytes each NVMe pass reads and writes (the "
          "directory needs this much free space), and the size of the "
          "link-um case's managed buffer.");
ABSL_FLAG(bool, quick, false,
          "Tiny sizes and few samples, a smoke test of every "
          "case in seconds (the numbers mean little); a --bench-size given "
          "still sets the NVMe and link-um sizes.");
ABSL_FLAG(std::string, timeline, "",
          "Write the timeline of transfers and leases "
          "as Chrome trace-event JSON (open in Perfetto) to this file.");
ABSL_FLAG(std::string, json, "",
          "Also write the report as JSON to this file; its \"config\" "
          "holds the run's flags, which --config reads back.");
ABSL_FLAG(std::string, config, "",
          "Set flags from this JSON object (keys spelled as the flags; a "
          "report's \"config\" object when it has one, so --config=REPORT "
          "repeats that run); flags on the command line win.");

namespace strata {
namespace {

// Prints `status`'s message as the command's error; returns 2 (bad input).
int BadInput(const std::string& command, const absl::Status& status) {
  std::fprintf(stderr, "strata%s%s: %s\n", command.empty() ? "" : " ",
               command.c_str(), std::string(status.message()).c_str());
  return 2;
}

// Whether `line` gives --distributed (before the flags are set from it).
bool GivesDistributed(const CommandLine& line) {
  bool given = false;
  for (const FlagArg& f : line.flags) {
    if (f.name == "distributed") given = f.value != "false" && f.value != "0";
  }
  return given;
}

// BadInput for a refusal of the command line: under mpirun with
// --distributed every rank was given it, and rank 0 alone says it.
int BadCommandLine(const std::string& command, const CommandLine& line,
                   const absl::Status& status) {
  DistributedRun::AwaitRankZeroRefusal(status, GivesDistributed(line));
  return BadInput(command, status);
}

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const CommandSpec& c : Commands()) names.push_back(c.name);
  return names;
}

absl::Status UnknownCommand(const std::string& name) {
  const std::string near = NearestName(name, CommandNames());
  return absl::InvalidArgumentError(
      near.empty()
          ? absl::StrFormat("unknown command '%s'; `strata --help` lists them",
                            name)
          : absl::StrFormat("unknown command '%s'; did you mean '%s'?", name,
                            near));
}

std::string VersionText() {
  const BuildInfo& b = GetBuildInfo();
  const auto yes = [](bool on) { return on ? "yes" : "no"; };
  return absl::StrFormat(
      "strata %s\ncommit:     %s\nbuild type: %s\ncuda:       %s\n"
      "io_uring:   %s\nmpi:        %s\n",
      b.version, b.commit, b.build_type, yes(b.cuda), yes(b.io_uring),
      yes(b.mpi));
}

// `strata help [command]`, `strata [command] --help`.
int Help(const std::string& topic) {
  if (topic.empty()) {
    std::fputs(MainHelp().c_str(), stdout);
    return 0;
  }
  const CommandSpec* command = FindCommand(topic);
  if (command == nullptr) return BadInput("", UnknownCommand(topic));
  std::fputs(CommandHelp(*command).c_str(), stdout);
  return 0;
}

// The flags to set: the --config file's, then the command line's (so an
// explicit flag wins). Each name is checked against the command's table.
absl::StatusOr<std::vector<FlagArg>> FlagsToSet(const CommandSpec& command,
                                                const CommandLine& line) {
  std::string config_path;
  for (const FlagArg& f : line.flags) {
    STRATA_RETURN_IF_ERROR(CheckFlagOf(&command, f.name, f.origin));
    if (f.name == "config") config_path = f.value;
  }
  std::vector<FlagArg> flags;
  if (!config_path.empty()) {
    STRATA_ASSIGN_OR_RETURN(
        flags,
        LoadConfigFile(config_path, command, DistributedRun::LaunchSize()));
  }
  flags.insert(flags.end(), line.flags.begin(), line.flags.end());
  return flags;
}

int Run(const std::string& command) {
  if (command == "train") {
    return RunTrain(absl::GetFlag(FLAGS_json), absl::GetFlag(FLAGS_timeline),
                    absl::GetFlag(FLAGS_plot));
  }
  if (command == "info") return RunInfo(absl::GetFlag(FLAGS_json));
  if (command == "scale") return RunScale(absl::GetFlag(FLAGS_json));
  absl::StatusOr<StoreOptions> options = StoreOptionsFromFlags();
  if (!options.ok()) return BadInput(command, options.status());
  BenchRequest request{.selector = absl::GetFlag(FLAGS_bench_case),
                       .list = absl::GetFlag(FLAGS_list),
                       .json_path = absl::GetFlag(FLAGS_json),
                       .timeline_path = absl::GetFlag(FLAGS_timeline),
                       .profile_path = absl::GetFlag(FLAGS_profile),
                       .plot_path = absl::GetFlag(FLAGS_plot),
                       .store = *options,
                       .nvme_bytes = absl::GetFlag(FLAGS_bench_size).bytes,
                       .quick = absl::GetFlag(FLAGS_quick),
                       .size_given = FlagGiven("bench_size"),
                       .config = EffectiveConfig(*FindCommand("bench"))};
  return RunBench(request);
}

}  // namespace

int Main(int argc, char** argv) {
  const CommandLine line =
      SplitCommandLine(std::vector<std::string>(argv + 1, argv + argc));
  if (line.version) {
    std::fputs(VersionText().c_str(), stdout);
    return 0;
  }
  const std::vector<std::string>& words = line.positionals;
  const std::string name = words.empty() ? "" : words[0];
  if (name == "help" && words.size() == 1 && line.flags.size() == 1 &&
      line.flags[0].name == "markdown" && line.error.ok()) {
    std::fputs(CliReferenceMarkdown().c_str(), stdout);  // docs/cli.md
    return 0;
  }
  if (name == "help" || line.help) {
    const std::string topic =
        name == "help" ? (words.size() > 1 ? words[1] : "") : name;
    return Help(topic);
  }
  if (name.empty()) {
    for (const FlagArg& f : line.flags) {
      absl::Status s = CheckFlagOf(nullptr, f.name, f.origin);
      if (!s.ok()) return BadInput("", s);
    }
    if (!line.error.ok()) return BadInput("", line.error);
    if (!line.flags.empty()) {
      return BadInput("", absl::InvalidArgumentError(absl::StrFormat(
                              "%s: no command; flags go after one (strata "
                              "COMMAND %s), `strata --help` lists them",
                              line.flags[0].origin, line.flags[0].origin)));
    }
    std::fputs(MainHelp().c_str(), stderr);
    return 2;
  }
  const CommandSpec* command = FindCommand(name);
  if (command == nullptr) return BadInput("", UnknownCommand(name));
  if (name == "completion") {
    if (!line.flags.empty() || !line.error.ok()) {
      return BadInput(name, absl::InvalidArgumentError(
                                "takes no flags: strata completion bash"));
    }
    if (words.size() > 2 || (words.size() == 2 && words[1] != "bash")) {
      return BadInput(name, absl::InvalidArgumentError(
                                "only bash: strata completion bash"));
    }
    std::fputs(BashCompletionScript().c_str(), stdout);
    return 0;
  }
  // A flag the command does not take is refused before a word that did
  // not split (a missing value): giving the value would not help it.
  absl::StatusOr<std::vector<FlagArg>> flags = FlagsToSet(*command, line);
  if (!flags.ok()) return BadCommandLine(name, line, flags.status());
  if (!line.error.ok()) return BadCommandLine(name, line, line.error);
  // export takes the checkpoint as its one argument.
  const size_t arguments = name == "export" ? 2 : 1;
  if (words.size() > arguments) {
    return BadCommandLine(name, line,
                          absl::InvalidArgumentError(absl::StrFormat(
                              "unexpected argument '%s' (flags are "
                              "--name=value)",
                              words[arguments])));
  }
  if (name == "train") ApplyTrainDefaults();
  if (absl::Status s = ApplyFlags(*flags); !s.ok()) {
    return BadCommandLine(name, line, s);
  }
  std::vector<std::string> given;
  for (const FlagArg& f : *flags) given.push_back("--" + f.name);
  RecordGivenFlags(given);
  if (name == "export") return RunExport(words.size() > 1 ? words[1] : "");
  return Run(name);
}

}  // namespace strata

int main(int argc, char** argv) { return strata::Main(argc, argv); }
