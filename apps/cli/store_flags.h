// store_flags.h: the command-line flags every strata subcommand shares — the
// tier budgets, NVMe directories and I/O settings — and their conversion to
// StoreOptions.
#ifndef STRATA_APPS_CLI_STORE_FLAGS_H_
#define STRATA_APPS_CLI_STORE_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "strata/options.h"

namespace strata {

// StoreOptions from the flags; InvalidArgument naming the flag for values
// that make no sense (unknown --device, zero budgets, ...).
absl::StatusOr<StoreOptions> StoreOptionsFromFlags();

// Remembers which flags `args` (the command line, names spelled with
// underscores) gives, for FlagGiven. Call before parsing.
void RecordGivenFlags(const std::vector<std::string>& args);

// True when flag `name` (underscore spelling) was given on the command line.
bool FlagGiven(const char* name);

// Replaces the defaults of --device-budget, --host-budget and --nvme-budget
// (a command whose job needs other sizes calls this before parsing).
void SetBudgetDefaults(uint64_t device_bytes, uint64_t host_bytes,
                       uint64_t nvme_bytes);

// After parsing: sets the budget flags the command line did not give (a
// model whose defaults differ from its command's).
void SetUnsetBudgets(uint64_t device_bytes, uint64_t host_bytes,
                     uint64_t nvme_bytes);

}  // namespace strata

#endif  // STRATA_APPS_CLI_STORE_FLAGS_H_
