// strata: the command line. `strata <command> [flags]`; see kUsage.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "apps/info_command.h"

ABSL_FLAG(std::string, json, "", "Also write the report as JSON to this file.");

namespace {

constexpr char kUsage[] = R"(a tiered tensor store (GPU / pinned host / NVMe).

Usage: strata <command> [flags]

Commands:
  info    Show the tiers strata finds here (device backend and why, host
          budget, NVMe files and I/O engine) and run a short round trip of one
          tensor through host -> NVMe -> device -> host.

Flags accept --name=value or --name value; dashes and underscores are the same
(--device-budget = --device_budget). Sizes take units: 64MiB, 2GiB.
Examples:
  strata info
  strata info --device=simulated --nvme-dir=/mnt/nvme0,/mnt/nvme1 --json=info.json
)";

// absl flags are spelled with underscores; accept the dashed spelling too.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>& storage) {
  storage.assign(argv, argv + argc);
  for (std::string& arg : storage) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> out;
  for (std::string& arg : storage) out.push_back(arg.data());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return file.find("apps/") != absl::string_view::npos;
  };
  absl::SetFlagsUsageConfig(config);
  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, storage);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() < 2) {
    std::fputs(kUsage, stderr);
    std::fputs("\nRun `strata --help` for every flag.\n", stderr);
    return 2;
  }
  const std::string command = positional[1];
  if (command == "info") return strata::RunInfo(absl::GetFlag(FLAGS_json));
  if (command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "strata: unknown command '%s'\n\n%s", command.c_str(),
               kUsage);
  return 2;
}
