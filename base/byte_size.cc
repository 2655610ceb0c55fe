#include "base/byte_size.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

namespace strata {
namespace {

struct Unit {
  const char* name;
  double factor;
};
constexpr Unit kUnits[] = {{"", 1},
                           {"b", 1},
                           {"k", 1024.0},
                           {"kib", 1024.0},
                           {"kb", 1e3},
                           {"m", 1048576.0},
                           {"mib", 1048576.0},
                           {"mb", 1e6},
                           {"g", 1073741824.0},
                           {"gib", 1073741824.0},
                           {"gb", 1e9},
                           {"t", 1099511627776.0},
                           {"tib", 1099511627776.0},
                           {"tb", 1e12},
                           {"p", 1125899906842624.0},
                           {"pib", 1125899906842624.0},
                           {"pb", 1e15},
                           {"e", 1152921504606846976.0},
                           {"eib", 1152921504606846976.0},
                           {"eb", 1e18}};

absl::Status Bad(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "'%s' is not a byte size: write a number with an optional unit, e.g. "
      "4096, 64KiB, 256MiB, 2GiB, 1.5GB",
      text));
}

// Sizes are at most the largest int64 (8 EiB less one byte): llround's
// range, and room to add sizes without overflow.
constexpr uint64_t kMaxBytes = uint64_t{9223372036854775807};

absl::Status TooLarge(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "'%s' is too large a byte size (it must be below 8 EiB)", text));
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  std::string s(
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  if (s.empty() ||
      !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) {
    return Bad(text);
  }
  // A plain count of bytes is read exactly (a double would round it).
  if (std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      })) {
    uint64_t bytes = 0;
    const auto [ptr, ec] =
        std::from_chars(s.data(), s.data() + s.size(), bytes);
    if (ec != std::errc() || bytes > kMaxBytes) return TooLarge(text);
    return bytes;
  }
  char* end = nullptr;
  const double number = std::strtod(s.c_str(), &end);
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(end));
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = number * u.factor;
    // 2^63: the first value past kMaxBytes that a double holds exactly.
    if (!std::isfinite(bytes) || bytes >= 9223372036854775808.0) {
      return TooLarge(text);
    }
    return static_cast<uint64_t>(std::llround(bytes));
  }
  return Bad(text);
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (value == std::floor(value)) {
    return absl::StrFormat("%d %s", static_cast<uint64_t>(value), kNames[unit]);
  }
  return absl::StrFormat("%.1f %s", value, kNames[unit]);
}

std::string FormatByteSizeAtLeast(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double scale = 1;
  while (bytes >= scale * 1024 && unit < 4) {
    scale *= 1024;
    ++unit;
  }
  if (unit == 0) return FormatByteSize(bytes);
  // Tenths of the unit, rounded up: the text parses back to >= bytes.
  const auto tenths =
      static_cast<uint64_t>(std::ceil(static_cast<double>(bytes) * 10 / scale));
  if (tenths % 10 == 0) {
    return absl::StrFormat("%d %s", tenths / 10, kNames[unit]);
  }
  return absl::StrFormat("%.1f %s", static_cast<double>(tenths) / 10,
                         kNames[unit]);
}

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  absl::StatusOr<uint64_t> bytes =
      ParseByteSize(std::string_view(text.data(), text.size()));
  if (!bytes.ok()) {
    *error = std::string(bytes.status().message());
    return false;
  }
  size->bytes = *bytes;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) {
  std::string s = FormatByteSize(size.bytes);
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

ByteShortfall FormatByteShortfall(uint64_t have, uint64_t need) {
  ByteShortfall s{FormatByteSize(have), FormatByteSizeAtLeast(need)};
  const absl::StatusOr<uint64_t> shown_have = ParseByteSize(s.have);
  const absl::StatusOr<uint64_t> shown_need = ParseByteSize(s.need);
  if (shown_have.ok() && shown_need.ok() && *shown_have < *shown_need) {
    return s;
  }
  // Rounded down and up, have < need keeps them apart.
  return {absl::StrFormat("%d KiB", have / 1024),
          absl::StrFormat("%d KiB", (need + 1023) / 1024)};
}

}  // namespace strata
