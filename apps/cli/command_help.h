// command_help.h: the help pages: `strata --help` lists the commands,
// `strata <command> --help` that command's flags only, grouped by concern,
// each with its value, its help and the command's own default.
#ifndef STRATA_APPS_CLI_COMMAND_HELP_H_
#define STRATA_APPS_CLI_COMMAND_HELP_H_

#include <string>

#include "apps/cli/command_table.h"

namespace strata {

// The overview: usage, the commands, examples, exit codes.
std::string MainHelp();

// `command`'s page. Its flags come from the table; their help text and
// default from the flags themselves unless the table gives the command's own.
std::string CommandHelp(const CommandSpec& command);

}  // namespace strata

#endif  // STRATA_APPS_CLI_COMMAND_HELP_H_
