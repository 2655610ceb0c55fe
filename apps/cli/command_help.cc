// command_help.cc: see command_help.h. The pages are drawn from absl's flag
// reflection (help, default) and the command table (groups, values), so no
// source path reaches the output, as absl's own --help would print.
#include "apps/cli/command_help.h"

#include <algorithm>
#include <cctype>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "apps/cli/command_line.h"

namespace strata {
namespace {

constexpr size_t kWidth = 79;
constexpr size_t kHelpColumn = 28;

constexpr char kConventions[] =
    "Flags accept --name=value or --name value (a value that starts with "
    "-- only as --name=value); dashes and underscores are "
    "the same (--device-budget = --device_budget); a bool flag is --name or "
    "--noname. SIZE takes units: 4096, 64KiB, 256MiB, 2GiB, 1.5GB. "
    "--config=FILE.json sets flags from a JSON object (or a report's "
    "\"config\"); flags on the command line win.";

constexpr char kExitCodes[] =
    "Exit codes: 0 success; 1 a failure while running; 2 bad input (an "
    "unknown command or flag, a bad value, an output that cannot be "
    "written).";

// `text` wrapped to kWidth, every line after the first indented by `indent`
// columns, the first starting at column `first`.
std::string Wrap(const std::string& text, size_t indent, size_t first) {
  std::string out;
  size_t column = first;
  bool line_start = true;
  for (const absl::string_view word :
       absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line_start && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++column;
    }
    out.append(word.data(), word.size());
    column += word.size();
    line_start = false;
  }
  return out;
}

std::string Capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(s[0]));
  return s;
}

// "--device-budget=SIZE", "--[no]prefetch".
std::string Spelling(const FlagEntry& e) {
  if (*e.value == '\0') return "--[no]" + Dashed(e.name);
  return absl::StrFormat("--%s=%s", Dashed(e.name), e.value);
}

std::string DefaultText(const FlagEntry& e, const absl::CommandLineFlag& f) {
  if (!e.default_text.empty()) return e.default_text;
  return f.DefaultValue();
}

// One flag: its spelling, then its help and default from column kHelpColumn.
std::string FlagLines(const FlagEntry& e) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(e.name);
  if (flag == nullptr) return "";
  std::string help = !e.help.empty() ? e.help : flag->Help();
  if (e.scope == ModelScope::kMlp) help = "(mlp) " + help;
  if (e.scope == ModelScope::kGpt) help = "(gpt) " + help;
  if (const std::string d = DefaultText(e, *flag); !d.empty()) {
    help += " Default: " + d + ".";
  }
  std::string out = "  " + Spelling(e);
  if (out.size() + 1 >= kHelpColumn) {
    out += "\n" + std::string(kHelpColumn, ' ');
  } else {
    out += std::string(kHelpColumn - out.size(), ' ');
  }
  return out + Wrap(help, kHelpColumn, kHelpColumn) + "\n";
}

// Flags defined under apps/ that no command's table places: shown, so that
// nothing a command accepts is hidden (cli_test asks for them to be placed).
std::string UnplacedFlags(const CommandSpec& command) {
  std::string out;
  for (const std::string& name : FlagNamesOf(&command)) {
    if (FindFlagEntry(command, name) != nullptr) continue;
    out += FlagLines(FlagEntry{name.c_str(), "other", "VALUE"});
  }
  return out.empty() ? "" : "\nOther:\n" + out;
}

}  // namespace

std::string MainHelp() {
  std::string out =
      "strata: a tiered tensor store (GPU / pinned host / NVMe), its "
      "training jobs and its benchmarks.\n\nUsage: strata <command> "
      "[flags]\n\nCommands:\n";
  for (const CommandSpec& c : Commands()) {
    out += absl::StrFormat("  %-12s%s\n", c.name, Wrap(c.summary, 14, 14));
  }
  out +=
      "\nRun `strata <command> --help` (or `strata help <command>`) for a\n"
      "command's flags, with units and defaults. `strata --version` prints\n"
      "the version and what this build supports.\n\nExamples:\n"
      "  strata train\n"
      "  strata train --max-steps=50 --json=run.json --plot=run.png\n"
      "  strata train --config=run.json        (repeats that run)\n"
      "  strata train --model=gpt --sample=60 --json=gpt.json\n"
      "  strata train --memory=unified --max-steps=50\n"
      "  strata info --device=simulated --nvme-dir=/mnt/nvme0,/mnt/nvme1\n"
      "  strata bench -t scheduler --json=scheduler.json\n\n";
  return out + Wrap(kConventions, 0, 0) + "\n\n" + Wrap(kExitCodes, 0, 0) +
         "\n";
}

std::string CommandHelp(const CommandSpec& command) {
  const std::string name = command.name;
  std::string out = absl::StrFormat(
      "strata %s: %s\n\nUsage: strata %s %s\n", name,
      Wrap(command.about, 0, name.size() + 9), name, command.usage);
  // FlagGroups' order first, then any group it lacks: a flag is never left
  // out of its command's help.
  std::vector<std::string> groups(FlagGroups().begin(), FlagGroups().end());
  for (const FlagEntry& e : command.flags) {
    if (std::find(groups.begin(), groups.end(), e.group) == groups.end()) {
      groups.push_back(e.group);
    }
  }
  for (const std::string& group : groups) {
    std::string lines;
    for (const FlagEntry& e : command.flags) {
      if (e.group == group) lines += FlagLines(e);
    }
    if (!lines.empty()) out += "\n" + Capitalized(group) + ":\n" + lines;
  }
  out += UnplacedFlags(command);
  if (!command.flags.empty()) out += "\n" + Wrap(kConventions, 0, 0) + "\n";
  return out + "\n" + Wrap(kExitCodes, 0, 0) + "\n";
}

}  // namespace strata
