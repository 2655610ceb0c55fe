// strata_main.cc: the command line (see strata_main.h): the flags every
// command shares, the command line prepared, then the command run.
#include "apps/strata_main.h"

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

// An Invocation that ends before any command runs: prints nothing yet.
Invocation Done(int exit_code, std::string out, std::string err = "") {
  return {.exit_code = exit_code, .out = std::move(out), .err = std::move(err)};
}

// BadInput's refusal, to print once the caller decides (Main).
Invocation Refused(const std::string& command, const absl::Status& status) {
  return Done(2, "",
              absl::StrFormat("strata%s%s: %s\n", command.empty() ? "" : " ",
                              command, std::string(status.message())));
}

// A refusal of the command line (BadCommandLine's).
Invocation RefusedLine(const std::string& command, const CommandLine& line,
                       const absl::Status& status) {
  Invocation out = Refused(command, status);
  out.line_refusal = status;
  out.distributed_given = GivesDistributed(line);
  return out;
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
Invocation Help(const std::string& topic) {
  if (topic.empty()) return Done(0, MainHelp());
  const CommandSpec* command = FindCommand(topic);
  if (command == nullptr) return Refused("", UnknownCommand(topic));
  return Done(0, CommandHelp(*command));
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

Invocation PrepareInvocation(const std::vector<std::string>& args) {
  const CommandLine line = SplitCommandLine(args);
  if (line.version) return Done(0, VersionText());
  const std::vector<std::string>& words = line.positionals;
  const std::string name = words.empty() ? "" : words[0];
  if (name == "help" && words.size() == 1 && line.flags.size() == 1 &&
      line.flags[0].name == "markdown" && line.error.ok()) {
    return Done(0, CliReferenceMarkdown());  // docs/cli.md
  }
  if (name == "help" || line.help) {
    return Help(name == "help" ? (words.size() > 1 ? words[1] : "") : name);
  }
  if (name.empty()) {
    for (const FlagArg& f : line.flags) {
      absl::Status s = CheckFlagOf(nullptr, f.name, f.origin);
      if (!s.ok()) return Refused("", s);
    }
    if (!line.error.ok()) return Refused("", line.error);
    if (!line.flags.empty()) {
      return Refused("", absl::InvalidArgumentError(absl::StrFormat(
                             "%s: no command; flags go after one (strata "
                             "COMMAND %s), `strata --help` lists them",
                             line.flags[0].origin, line.flags[0].origin)));
    }
    return Done(2, "", MainHelp());
  }
  const CommandSpec* command = FindCommand(name);
  if (command == nullptr) return Refused("", UnknownCommand(name));
  if (name == "completion") {
    if (!line.flags.empty() || !line.error.ok()) {
      return Refused(name, absl::InvalidArgumentError(
                               "takes no flags: strata completion bash"));
    }
    if (words.size() > 2 || (words.size() == 2 && words[1] != "bash")) {
      return Refused(name, absl::InvalidArgumentError(
                               "only bash: strata completion bash"));
    }
    return Done(0, BashCompletionScript());
  }
  // A flag the command does not take is refused before a word that did
  // not split (a missing value): giving the value would not help it.
  absl::StatusOr<std::vector<FlagArg>> flags = FlagsToSet(*command, line);
  if (!flags.ok()) return RefusedLine(name, line, flags.status());
  if (!line.error.ok()) return RefusedLine(name, line, line.error);
  // export takes the checkpoint as its one argument.
  const size_t arguments = name == "export" ? 2 : 1;
  if (words.size() > arguments) {
    return RefusedLine(name, line,
                       absl::InvalidArgumentError(absl::StrFormat(
                           "unexpected argument '%s' (flags are "
                           "--name=value)",
                           words[arguments])));
  }
  if (name == "train") ApplyTrainDefaults();
  if (absl::Status s = ApplyFlags(*flags); !s.ok()) {
    return RefusedLine(name, line, s);
  }
  std::vector<std::string> given;
  for (const FlagArg& f : *flags) given.push_back("--" + f.name);
  RecordGivenFlags(given);
  return {.command = name, .argument = words.size() > 1 ? words[1] : ""};
}

int Main(int argc, char** argv) {
  const Invocation invocation =
      PrepareInvocation(std::vector<std::string>(argv + 1, argv + argc));
  if (invocation.exit_code < 0) {
    if (invocation.command == "export") return RunExport(invocation.argument);
    return Run(invocation.command);
  }
  if (!invocation.line_refusal.ok()) {
    DistributedRun::AwaitRankZeroRefusal(invocation.line_refusal,
                                         invocation.distributed_given);
  }
  std::fputs(invocation.out.c_str(), stdout);
  std::fputs(invocation.err.c_str(), stderr);
  return invocation.exit_code;
}

}  // namespace strata
