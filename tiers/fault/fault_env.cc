// fault_env.cc: STRATA_TEST_BLOCK_IO_FAULTS, a FaultSpec from the
// environment (see fault_env.h).
#include "tiers/fault/fault_env.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata {
namespace {

absl::Status Bad(absl::string_view pair, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      kBlockIoFaultsEnv, ": cannot read '", pair, "' (", want,
      "); the form is seed=N,rate=P,nth=N,from=N,ops=all|reads|writes,"
      "kind=eio|enospc|short-read|short-write|bit-flip"));
}

// Looks `v` up among `names` and sets `*out` to its value; false if absent.
template <typename T, size_t N>
bool Lookup(absl::string_view v, const std::pair<const char*, T> (&names)[N],
            T* out) {
  for (const auto& [name, value] : names) {
    if (v == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

constexpr std::pair<const char*, FaultOps> kOps[] = {
    {"all", FaultOps::kAll},
    {"reads", FaultOps::kReads},
    {"writes", FaultOps::kWrites}};
constexpr std::pair<const char*, FaultKind> kKinds[] = {
    {"eio", FaultKind::kEio},
    {"enospc", FaultKind::kEnospc},
    {"short-read", FaultKind::kShortRead},
    {"short-write", FaultKind::kShortWrite},
    {"bit-flip", FaultKind::kBitFlip}};

// Sets the field `key` of `spec` from `value`; false if either is not one
// the form allows.
bool SetField(absl::string_view key, absl::string_view value, FaultSpec* spec) {
  if (key == "seed") return absl::SimpleAtoi(value, &spec->seed);
  if (key == "nth") return absl::SimpleAtoi(value, &spec->nth);
  if (key == "from") return absl::SimpleAtoi(value, &spec->from);
  if (key == "ops") return Lookup(value, kOps, &spec->ops);
  if (key == "kind") return Lookup(value, kKinds, &spec->kind);
  if (key == "rate") {
    return absl::SimpleAtod(value, &spec->rate) && spec->rate >= 0 &&
           spec->rate <= 1;
  }
  return false;
}

}  // namespace

absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text) {
  FaultSpec spec;
  for (absl::string_view pair : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const std::vector<absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.size() != 2) return Bad(pair, "not key=value");
    if (!SetField(kv[0], kv[1], &spec))
      return Bad(pair, "unknown key or value");
  }
  return spec;
}

absl::StatusOr<std::optional<FaultSpec>> BlockIoFaultsFromEnv() {
  const char* text = std::getenv(kBlockIoFaultsEnv);
  if (text == nullptr || *text == '\0') return std::nullopt;
  absl::StatusOr<FaultSpec> spec = ParseFaultSpec(text);
  if (!spec.ok()) return spec.status();
  return std::optional<FaultSpec>(*spec);
}

}  // namespace strata
