// command_table.h: which flags each `strata` command takes, grouped by
// concern, with the value each expects and the command's own defaults. Help,
// flag checking, config files and bash completion all read this one table,
// so a command's help, what it accepts and what it completes never disagree.
#ifndef STRATA_APPS_CLI_COMMAND_TABLE_H_
#define STRATA_APPS_CLI_COMMAND_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

namespace strata {

// Which of `strata train`'s models a flag belongs to.
enum class ModelScope { kAll, kMlp, kGpt };

struct FlagEntry {
  const char* name;   // absl spelling (underscores)
  const char* group;  // "model", "data", "budgets and tiers", ...
  // What the value is: "SIZE", "N", "FILE", or the choices "mlp|gpt"
  // (completion offers those); "" for a bool (--name / --noname).
  const char* value;
  ModelScope scope = ModelScope::kAll;
  std::string default_text;  // this command's default, if not the flag's
  std::string help;          // this command's help, if not the flag's
};

struct CommandSpec {
  const char* name;
  const char* summary;  // one line, for `strata --help`
  const char* about;    // a paragraph, for `strata <command> --help`
  const char* usage;    // what follows the name: "[flags]", "bash"
  std::vector<FlagEntry> flags;
};

// train, info, bench, export, scale, then the commands without flags (help,
// completion).
const std::vector<CommandSpec>& Commands();

// The command named `name`, or null.
const CommandSpec* FindCommand(std::string_view name);

// The entry for flag `name` (underscore spelling) in `command`, or null.
const FlagEntry* FindFlagEntry(const CommandSpec& command,
                               std::string_view name);

// The groups in the order help prints them.
const std::vector<const char*>& FlagGroups();

// `name` spelled as README and help spell it: dashes for underscores.
std::string Dashed(std::string_view name);

}  // namespace strata

#endif  // STRATA_APPS_CLI_COMMAND_TABLE_H_
