// info_command.h: `strata info` — what tiers this machine gives strata, and a
// short round trip through all of them.
#ifndef STRATA_APPS_INFO_COMMAND_H_
#define STRATA_APPS_INFO_COMMAND_H_

#include <string>

namespace strata {

// Opens a store from the flags, prints its tiers, moves one tensor through
// host -> NVMe -> device -> host and checks the bytes. Writes a JSON report
// to `json_path` if non-empty. Returns the process exit code.
int RunInfo(const std::string& json_path);

}  // namespace strata

#endif  // STRATA_APPS_INFO_COMMAND_H_
