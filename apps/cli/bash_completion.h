// bash_completion.h: the bash completion script `strata completion bash`
// prints and `cmake --install` installs: the commands, each command's flags
// and the values of its choice flags, all from the command table.
#ifndef STRATA_APPS_CLI_BASH_COMPLETION_H_
#define STRATA_APPS_CLI_BASH_COMPLETION_H_

#include <string>

namespace strata {

std::string BashCompletionScript();

}  // namespace strata

#endif  // STRATA_APPS_CLI_BASH_COMPLETION_H_
