// command_line.h: reads `strata <command> [flags]` without handing argv to
// absl's parser, which exits 1 on a misspelt flag and cannot suggest the
// name meant. Flags are --name=value, --name value, --name / --noname for a
// bool, dashes or underscores alike; `-t NAME` is --bench-case=NAME. Every
// name is checked against the command's table (command_table.h) before any
// flag is set.
#ifndef STRATA_APPS_CLI_COMMAND_LINE_H_
#define STRATA_APPS_CLI_COMMAND_LINE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "apps/cli/command_table.h"

namespace strata {

struct FlagArg {
  std::string name;   // underscore spelling; perhaps no flag's (CheckFlagOf)
  std::string value;  // the text to parse
  std::string
      origin;  // where it came from, for errors: "--width", "key 'width'"
};

struct CommandLine {
  std::vector<std::string> positionals;  // the command first, if given
  std::vector<FlagArg> flags;            // in command-line order
  bool help = false;                     // --help, -h
  bool version = false;                  // --version
  // The first word that could not be split (InvalidArgument: a flag that
  // needs a value and has none, a bool given one with --noname); the words
  // after it are split all the same, so the refusal can name the command.
  absl::Status error;
};

// Splits `args` (argv without the program name).
CommandLine SplitCommandLine(const std::vector<std::string>& args);

// True for a flag defined by strata (not one of absl's own); `name` in
// underscore spelling.
bool IsStrataFlag(std::string_view name);

// OK when `command` takes flag `name`: it is in the command's table, or it
// is a strata flag no command's table places. InvalidArgument otherwise,
// naming `origin`, the nearest name the command takes, and the command
// that takes it when another does.
absl::Status CheckFlagOf(const CommandSpec* command, std::string_view name,
                         std::string_view origin);

// Sets each flag, in order (a later one wins). InvalidArgument naming the
// flag's origin and value when a value does not parse.
absl::Status ApplyFlags(const std::vector<FlagArg>& flags);

// The flag names `command` takes, underscore spelling (null: every command's).
std::vector<std::string> FlagNamesOf(const CommandSpec* command);

}  // namespace strata

#endif  // STRATA_APPS_CLI_COMMAND_LINE_H_
