// command_line.cc: see command_line.h.
#include "apps/cli/command_line.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/cli/flag_suggest.h"
#include "strata/status.h"

namespace strata {
namespace {

absl::CommandLineFlag* FindStrataFlag(std::string_view name) {
  absl::CommandLineFlag* flag =
      absl::FindCommandLineFlag(absl::string_view(name.data(), name.size()));
  if (flag == nullptr) return nullptr;
  // absl's own flags (--flagfile, --fromenv, ...) live outside apps/.
  return flag->Filename().find("apps/") != std::string::npos ? flag : nullptr;
}

bool IsBoolFlag(std::string_view name) {
  const absl::CommandLineFlag* flag = FindStrataFlag(name);
  return flag != nullptr && flag->IsOfType<bool>();
}

// "--device-budget=1GiB" -> ("device_budget", "1GiB", true).
struct Spelled {
  std::string name;
  std::string value;
  bool has_value = false;
};

Spelled SplitFlag(std::string_view arg) {
  arg.remove_prefix(arg.rfind("--", 0) == 0 ? 2 : 1);
  Spelled s;
  const size_t eq = arg.find('=');
  s.name = std::string(arg.substr(0, eq));
  std::replace(s.name.begin(), s.name.end(), '-', '_');
  if (eq != std::string_view::npos) {
    s.value = std::string(arg.substr(eq + 1));
    s.has_value = true;
  }
  return s;
}

// --noprefetch and --no-prefetch: the bool flag's name, or "".
std::string NegatedBool(const std::string& name) {
  if (name.rfind("no", 0) != 0) return "";
  std::string base = name.substr(name.rfind("no_", 0) == 0 ? 3 : 2);
  return IsBoolFlag(base) ? base : "";
}

// Every strata flag's name, the table's and any defined but placed nowhere.
std::set<std::string> AllStrataFlags() {
  std::set<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string text(name.data(), name.size());
    if (FindStrataFlag(text) != nullptr) names.insert(text);
  }
  return names;
}

// The command that takes `name`, or null when no table places it.
const CommandSpec* PlacedIn(std::string_view name) {
  for (const CommandSpec& c : Commands()) {
    if (FindFlagEntry(c, name) != nullptr) return &c;
  }
  return nullptr;
}

}  // namespace

bool IsStrataFlag(std::string_view name) {
  return FindStrataFlag(name) != nullptr;
}

namespace {

// A word that is a flag (or --help, --, -t), not a value: a value-taking
// flag followed by one has no value (`--json --help` asks for help; it
// does not write the report to a file named --help). Single-dash numbers
// (--lr -1e-3) are values.
bool LooksLikeAFlag(const std::string& word) {
  return word.rfind("--", 0) == 0 || word == "-t" || word == "-h" ||
         word == "-help";
}

// Flags naming a file or directory, whose empty default means "none": an
// empty value given on the command line is a mistake (`--resume="$DIR"`
// with DIR unset would train from scratch and say nothing), not a request
// for the default. (--nvme-dir= is a request: no NVMe tier.)
bool IsPathFlag(const std::string& name) {
  constexpr std::string_view kPaths[] = {
      "save_dir",        "resume",  "safetensors", "corpus",   "cache_dir",
      "machine_profile", "profile", "plot",        "timeline", "json",
      "config",          "data_dir"};
  return std::find(std::begin(kPaths), std::end(kPaths), name) !=
         std::end(kPaths);
}

// The help word (--help, --version, ...) that `arg` gives a value, or "".
std::string HelpWordGivenAValue(const std::string& arg) {
  const std::string name = arg.substr(0, arg.find('='));
  const bool help_word = name == "--help" || name == "-h" || name == "-help" ||
                         name == "--helpfull" || name == "--helpshort" ||
                         name == "--version";
  return help_word && name.size() < arg.size() ? name : "";
}

// Appends the flag at args[*i] (--name, --name=value, --name value,
// --noname), advancing *i past a value it takes from the next word.
absl::Status AddFlag(const std::vector<std::string>& args, size_t* i,
                     CommandLine* out) {
  const std::string& arg = args[*i];
  Spelled s = SplitFlag(arg);
  if (const std::string base = NegatedBool(s.name);
      !base.empty() && !IsStrataFlag(s.name)) {
    if (s.has_value) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s takes no value (write --no%s, or --%s=true|false)",
          arg.substr(0, arg.find('=')), Dashed(base), Dashed(base)));
    }
    out->flags.push_back({base, "false", "--no" + Dashed(base)});
    return absl::OkStatus();
  }
  // An unknown name takes no value here; CheckFlagOf refuses it later.
  if (!s.has_value && IsStrataFlag(s.name)) {
    if (IsBoolFlag(s.name)) {
      s.value = "true";
    } else if (*i + 1 < args.size() && !LooksLikeAFlag(args[*i + 1])) {
      s.value = args[++*i];
    } else {
      // Still listed (with no value), so that a flag the command does not
      // take is refused as such first.
      out->flags.push_back({s.name, "", "--" + Dashed(s.name)});
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s needs a value: --%s=VALUE", Dashed(s.name), Dashed(s.name)));
    }
  }
  // An unknown name is reported as typed (-v, not --v).
  out->flags.push_back({s.name, s.value,
                        IsStrataFlag(s.name) ? "--" + Dashed(s.name)
                                             : arg.substr(0, arg.find('='))});
  if (s.value.empty() && IsPathFlag(s.name)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s is given an empty value: give a path, or leave the flag out",
        Dashed(s.name)));
  }
  return absl::OkStatus();
}

}  // namespace

CommandLine SplitCommandLine(const std::vector<std::string>& args) {
  CommandLine out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // the rest is positional
      out.positionals.insert(out.positionals.end(), args.begin() + i + 1,
                             args.end());
      break;
    }
    if (arg == "--help" || arg == "-h" || arg == "-help" ||
        arg == "--helpfull" || arg == "--helpshort") {
      out.help = true;
    } else if (arg == "--version") {
      out.version = true;
    } else if (const std::string name = HelpWordGivenAValue(arg);
               !name.empty()) {
      if (out.error.ok()) {
        out.error = absl::InvalidArgumentError(
            absl::StrFormat("%s takes no value: write %s", name, name));
      }
    } else if (arg == "-t" || arg.rfind("-t=", 0) == 0) {  // bench -t NAME
      if (arg == "-t" &&
          (i + 1 == args.size() || LooksLikeAFlag(args[i + 1]))) {
        out.flags.push_back({"bench_case", "", "-t"});  // see AddFlag
        if (out.error.ok()) {
          out.error =
              absl::InvalidArgumentError("-t needs a case name: -t NAME");
        }
        continue;
      }
      out.flags.push_back(
          {"bench_case", arg == "-t" ? args[++i] : arg.substr(3), "-t"});
    } else if (arg.size() > 1 && arg[0] == '-') {
      if (absl::Status added = AddFlag(args, &i, &out);
          !added.ok() && out.error.ok()) {
        out.error = added;
      }
    } else {
      out.positionals.push_back(arg);
    }
  }
  return out;
}

std::vector<std::string> FlagNamesOf(const CommandSpec* command) {
  std::vector<std::string> names;
  for (const std::string& name : AllStrataFlags()) {
    const CommandSpec* placed = PlacedIn(name);
    if (command == nullptr || placed == nullptr ||
        FindFlagEntry(*command, name) != nullptr) {
      names.push_back(name);
    }
  }
  return names;
}

absl::Status CheckFlagOf(const CommandSpec* command, std::string_view name,
                         std::string_view origin) {
  const std::string help =
      command != nullptr
          ? absl::StrFormat("`strata %s --help` lists its flags", command->name)
          : std::string("`strata <command> --help` lists its flags");
  if (!IsStrataFlag(name)) {
    std::vector<std::string> names = FlagNamesOf(command);
    // -v and -V are how many tools ask for their version; any other
    // one-letter name is too short to suggest a flag from.
    std::string near;
    if (name == "v" || name == "V") {
      near = "version";
    } else if (name.size() > 1) {
      near = NearestName(name, names);
    }
    if (near.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown flag %s; %s", origin, help));
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown flag %s; did you mean --%s?", origin, Dashed(near)));
  }
  const CommandSpec* placed = PlacedIn(name);
  if (command == nullptr || placed == nullptr ||
      FindFlagEntry(*command, name) != nullptr) {
    return absl::OkStatus();
  }
  // Every command that takes it (`placed`, at least: never empty here).
  std::vector<std::string> owners;
  for (const CommandSpec& c : Commands()) {
    if (FindFlagEntry(c, name) != nullptr) {
      owners.push_back(absl::StrFormat("`strata %s`", c.name));
    }
  }
  std::string list = owners.back();
  if (owners.size() > 1) {
    owners.pop_back();
    list = absl::StrCat(absl::StrJoin(owners, ", "), " and ", list);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s is not a flag of `strata %s` (it belongs to %s); %s",
                      origin, command->name, list, help));
}

namespace {

// What a flag of `flag`'s type takes, for a value that did not parse ("" for
// the types whose own parse errors say it: sizes, enums).
std::string ExpectedValue(const absl::CommandLineFlag& flag) {
  const std::string example = absl::StrFormat(
      ", e.g. --%s=%s", Dashed(std::string(flag.Name())), flag.DefaultValue());
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() ||
      flag.IsOfType<uint64_t>() || flag.IsOfType<uint32_t>()) {
    return " (give a whole number" + example + ")";
  }
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) {
    return " (give a number" + example + ")";
  }
  if (flag.IsOfType<bool>()) return " (give true or false)";
  return "";
}

// For a whole number too large (or small) for an integer flag: "out of
// range (at most N)"; "" for anything else.
std::string OutOfRange(const absl::CommandLineFlag& flag,
                       const std::string& value) {
  const bool negative = !value.empty() && value[0] == '-';
  const std::string_view number =
      std::string_view(value).substr(negative || value.starts_with('+'));
  if (number.empty() ||
      !std::all_of(number.begin(), number.end(), absl::ascii_isdigit)) {
    return "";
  }
  auto range = [&]<typename T>(T) {
    return negative && std::numeric_limits<T>::min() < 0
               ? absl::StrFormat("out of range (at least %d)",
                                 std::numeric_limits<T>::min())
               : absl::StrFormat("out of range (at most %d)",
                                 std::numeric_limits<T>::max());
  };
  if (flag.IsOfType<int32_t>()) return range(int32_t{});
  if (flag.IsOfType<int64_t>()) return range(int64_t{});
  if (flag.IsOfType<uint32_t>() && !negative) return range(uint32_t{});
  if (flag.IsOfType<uint64_t>() && !negative) return range(uint64_t{});
  return "";
}

// absl words a parse error "Illegal value 'V' specified for flag 'N'; WHY"
// (WHY only from strata's own types), and the message already starts
// "--n=V:": keep WHY, or say plainly that the value is not one.
std::string ParseReason(const std::string& error) {
  if (error.rfind("Illegal value '", 0) != 0) return error;
  const size_t why = error.find("'; ");
  return why == std::string::npos ? "not a valid value" : error.substr(why + 3);
}

}  // namespace

absl::Status ApplyFlags(const std::vector<FlagArg>& flags) {
  for (const FlagArg& f : flags) {
    absl::CommandLineFlag* flag = FindStrataFlag(f.name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown flag %s", f.origin));
    }
    std::string error;
    if (!flag->ParseFrom(f.value, &error)) {
      if (const std::string range = OutOfRange(*flag, f.value);
          !range.empty()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s=%s: %s", f.origin, f.value, range));
      }
      return absl::InvalidArgumentError(
          absl::StrFormat("%s=%s: %s%s", f.origin, f.value, ParseReason(error),
                          ExpectedValue(*flag)));
    }
  }
  return absl::OkStatus();
}

}  // namespace strata
