// config_file.cc: see config_file.h. A JSON value becomes the flag's text
// (then parsed by the flag itself, as a command-line value is) only when its
// JSON type fits the flag's type, so `"width": "abc"` and `"prefetch": 1`
// are refused by name rather than read loosely.
#include "apps/cli/config_file.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/cli/flag_suggest.h"
#include "base/byte_size.h"
#include "base/json_nesting.h"
#include "strata/status.h"

namespace strata {
namespace {

bool IsIntegerFlag(const absl::CommandLineFlag& f) {
  return f.IsOfType<int32_t>() || f.IsOfType<int64_t>() ||
         f.IsOfType<uint32_t>() || f.IsOfType<uint64_t>();
}

// The flag's text for JSON value `v`, or "" with `*expected` set to what
// the flag needs when `v`'s type does not fit.
std::optional<std::string> FlagText(const absl::CommandLineFlag& f,
                                    const nlohmann::json& v,
                                    std::string* expected) {
  if (f.IsOfType<bool>()) {
    *expected = "true or false";
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  } else if (IsIntegerFlag(f)) {
    *expected = "an integer";
    if (v.is_number_integer()) return v.dump();
  } else if (f.IsOfType<double>()) {
    *expected = "a number";
    if (v.is_number()) return v.dump();
  } else if (f.IsOfType<ByteSize>()) {
    *expected = "a size (\"64MiB\" or a number of bytes)";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_unsigned()) return v.dump();
  } else if (f.IsOfType<std::vector<std::string>>()) {
    *expected = "a list of strings";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
      std::vector<std::string> items;
      for (const nlohmann::json& item : v) {
        if (!item.is_string()) return std::nullopt;
        items.push_back(item.get<std::string>());
      }
      return absl::StrJoin(items, ",");
    }
  } else {
    *expected = "a string";
    if (v.is_string()) return v.get<std::string>();
  }
  return std::nullopt;
}

// The flag's value as JSON of its own type.
nlohmann::json FlagJson(const absl::CommandLineFlag& f) {
  if (auto v = f.TryGet<bool>()) return *v;
  if (auto v = f.TryGet<int32_t>()) return *v;
  if (auto v = f.TryGet<int64_t>()) return *v;
  if (auto v = f.TryGet<uint32_t>()) return *v;
  if (auto v = f.TryGet<uint64_t>()) return *v;
  if (auto v = f.TryGet<double>()) return *v;
  if (auto v = f.TryGet<std::vector<std::string>>()) return *v;
  if (auto v = f.TryGet<ByteSize>()) {
    const std::string text = AbslUnparseFlag(*v);
    absl::StatusOr<uint64_t> back = ParseByteSize(text);
    if (back.ok() && *back == v->bytes) return text;
    return v->bytes;
  }
  return f.CurrentValue();
}

// Where a run writes (the output files, checkpoints) and what it resumes
// from are not what it is: left out, so a repeat neither overwrites nor
// resumes. The checkpoint group goes whole: --save-every without the
// --save-dir it needs would make the repeat an error.
bool IsRunSetting(const FlagEntry& e) {
  if (std::string_view(e.group) == "checkpoints") return false;
  return std::string_view(e.group) != "output" ||
         std::string_view(e.value).rfind("FILE", 0) != 0;
}

bool RanWithModel(const FlagEntry& e) {
  if (e.scope == ModelScope::kAll) return true;
  const absl::CommandLineFlag* model = absl::FindCommandLineFlag("model");
  const std::string ran = model != nullptr ? model->CurrentValue() : "gpt";
  return (e.scope == ModelScope::kGpt) == (ran == "gpt");
}

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path,
                                        int launch_ranks) {
  // A directory opens as a stream but throws on the first read.
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--config=%s is a directory; pass a JSON file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("--config=%s cannot be read", path));
  }
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (JsonNestingDepth(text) > kMaxJsonNesting) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--config=%s nests deeper than %d levels; a config is an object of "
        "flags",
        path, kMaxJsonNesting));
  }
  // A key given twice in one object would be last-wins in nlohmann::json:
  // the callback sees each object's keys as they are parsed.
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string twice;
  const nlohmann::json::parser_callback_t note_keys =
      [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        if (event == Event::object_start) keys.emplace_back();
        if (event == Event::object_end && !keys.empty()) keys.pop_back();
        if (event == Event::key && !keys.empty() && twice.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second) {
          twice = parsed.get<std::string>();
        }
        return true;
      };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, note_keys);
  } catch (const nlohmann::json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L,
    // column C: ...": the part after the tag says where and why. Not only
    // parse errors: a number past a double's range is an out_of_range
    // (found by the config_file fuzz target: it terminated strata).
    const std::string_view what = e.what();
    const size_t tag = what.find("] ");
    return absl::InvalidArgumentError(absl::StrFormat(
        "--config=%s is not valid JSON: %s", path,
        tag == std::string_view::npos ? what : what.substr(tag + 2)));
  }
  if (!twice.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--config=%s: key '%s' appears twice in one object; keep one", path,
        twice));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--config=%s: not a JSON object of flags (e.g. {\"batch\": 8})", path));
  }
  if (!j.contains("config") || !j["config"].is_object()) return j;
  // A sharded run's report: its global batch is its ranks' micro-batches
  // together, so it repeats only with as many ranks.
  const nlohmann::json dist = j.value("distributed", nlohmann::json());
  const nlohmann::json ranks = dist.is_object()
                                   ? dist.value("ranks", nlohmann::json(1))
                                   : nlohmann::json(1);
  if (ranks.is_number_integer() && ranks.get<int>() != launch_ranks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--config=%s is the report of a %d-rank run and this is %d: launch "
        "it with mpirun -np %d (its global batch is each rank's --batch x "
        "--accumulate times the ranks)",
        path, ranks.get<int>(), launch_ranks, ranks.get<int>()));
  }
  return j["config"];
}

}  // namespace

absl::StatusOr<std::vector<FlagArg>> LoadConfigFile(const std::string& path,
                                                    const CommandSpec& command,
                                                    int launch_ranks) {
  STRATA_ASSIGN_OR_RETURN(nlohmann::json j, ReadJson(path, launch_ranks));
  std::vector<FlagArg> flags;
  std::map<std::string, std::string> seen;  // flag name -> the key that set it
  for (const auto& [key, value] : j.items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '-', '_');
    const std::string origin =
        absl::StrFormat("--config=%s: key '%s'", path, key);
    // "max-steps" and "max_steps" are one flag: which should win is the
    // user's to say, not the key order's.
    if (const auto [it, added] = seen.emplace(name, key); !added) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--config=%s: keys '%s' and '%s' both set --%s; keep one", path,
          it->second, key, Dashed(name)));
    }
    if (name == "config") {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: a config cannot name another", origin));
    }
    if (!IsStrataFlag(name)) {
      const std::string near = NearestName(name, FlagNamesOf(&command));
      return absl::InvalidArgumentError(absl::StrFormat(
          "--config=%s: unknown key '%s'%s", path, key,
          near.empty() ? "; `strata " + std::string(command.name) +
                             " --help` lists the flags"
                       : "; did you mean '" + near + "'?"));
    }
    STRATA_RETURN_IF_ERROR(CheckFlagOf(&command, name, origin));
    std::string expected;
    std::optional<std::string> text =
        FlagText(*absl::FindCommandLineFlag(name), value, &expected);
    if (!text) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: expected %s, got %s", origin, expected, value.dump()));
    }
    flags.push_back({name, *text, origin});
  }
  return flags;
}

nlohmann::json EffectiveConfig(const CommandSpec& command) {
  nlohmann::json config = nlohmann::json::object();
  for (const FlagEntry& e : command.flags) {
    if (!IsRunSetting(e) || !RanWithModel(e)) continue;
    if (const absl::CommandLineFlag* f = absl::FindCommandLineFlag(e.name)) {
      config[e.name] = FlagJson(*f);
    }
  }
  // A flag no table places yet is still part of the run.
  for (const std::string& name : FlagNamesOf(&command)) {
    if (FindFlagEntry(command, name) == nullptr) {
      config[name] = FlagJson(*absl::FindCommandLineFlag(name));
    }
  }
  return config;
}

}  // namespace strata
