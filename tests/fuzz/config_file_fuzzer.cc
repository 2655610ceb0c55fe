// config_file_fuzzer.cc: `--config=FILE`, a run's flags as a JSON object or
// a run's report, as each command reads it (LoadConfigFile), and then set
// as the command line would set them (ApplyFlags, undone after). Every flag
// an accepted file sets is one its command takes.
#include <string>
#include <vector>

#include "apps/cli/command_line.h"
#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "tests/fuzz/fuzz_target.h"

STRATA_FUZZ_TARGET(config_file) {
  using namespace strata;
  const std::string path = fuzz::FreshScratchDir() + "/run.json";
  fuzz::WriteFile(path, data);
  bool accepted = false;
  for (const CommandSpec& command : Commands()) {
    auto flags = LoadConfigFile(path, command, /*launch_ranks=*/1);
    STRATA_FUZZ_CHECK_REFUSAL(flags.status());
    if (!flags.ok()) continue;
    for (const FlagArg& f : *flags) {
      STRATA_FUZZ_CHECK(CheckFlagOf(&command, f.name, f.origin).ok());
    }
    fuzz::FlagRestorer restorer;  // every flag back as it was
    const absl::Status applied = ApplyFlags(*flags);
    STRATA_FUZZ_CHECK_REFUSAL(applied);
    accepted = accepted || applied.ok();
  }
  return accepted;
}
