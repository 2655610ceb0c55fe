// json_numbers.h: whole numbers read from JSON without undefined behaviour.
// nlohmann::json's get<uint64_t>() casts whatever number it holds: a float
// past the type's range (6.7e89 as a byte count) is undefined behaviour, a
// negative or too-large integer wraps (found by the fuzz targets,
// tests/fuzz). Every reader of a user's file reads its integer fields
// through JsonInteger.
#ifndef STRATA_BASE_JSON_NUMBERS_H_
#define STRATA_BASE_JSON_NUMBERS_H_

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

namespace strata {

// The value of `j` as a T when `j` holds an integer (not a float, however
// whole: strata writes integers as integers) inside T's range; nullopt
// otherwise.
template <typename T>
std::optional<T> JsonInteger(const nlohmann::json& j) {
  static_assert(std::is_integral_v<T>);
  using Limits = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(Limits::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  if (j.is_number_integer()) {  // a negative one (else it is unsigned)
    const int64_t v = j.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      return std::nullopt;
    } else {
      if (v < static_cast<int64_t>(Limits::min())) return std::nullopt;
      return static_cast<T>(v);
    }
  }
  return std::nullopt;
}

}  // namespace strata

#endif  // STRATA_BASE_JSON_NUMBERS_H_
