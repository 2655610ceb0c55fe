// json_numbers_test.cc: JsonInteger takes integers inside the type's range
// and nothing else.
#include "base/json_numbers.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace strata {
namespace {

using json = nlohmann::json;

TEST(JsonNumbersTest, IntegersInsideTheRangeAreRead) {
  EXPECT_EQ(JsonInteger<uint64_t>(json::parse("18446744073709551615")),
            UINT64_MAX);
  EXPECT_EQ(JsonInteger<int64_t>(json::parse("-9223372036854775808")),
            INT64_MIN);
  EXPECT_EQ(JsonInteger<uint32_t>(json::parse("4294967295")), UINT32_MAX);
  EXPECT_EQ(JsonInteger<int>(json::parse("-7")), -7);
}

TEST(JsonNumbersTest, FloatsOutOfRangeAndOtherTypesAreNot) {
  EXPECT_EQ(JsonInteger<uint64_t>(json::parse("6.66667e+89")), std::nullopt);
  EXPECT_EQ(JsonInteger<uint64_t>(json::parse("1.0")), std::nullopt);
  EXPECT_EQ(JsonInteger<uint64_t>(json::parse("-1")), std::nullopt);
  EXPECT_EQ(JsonInteger<uint32_t>(json::parse("4294967296")), std::nullopt);
  EXPECT_EQ(JsonInteger<int64_t>(json::parse("9223372036854775808")),
            std::nullopt);
  EXPECT_EQ(JsonInteger<int>(json::parse("-2147483649")), std::nullopt);
  EXPECT_EQ(JsonInteger<int>(json::parse("\"3\"")), std::nullopt);
  EXPECT_EQ(JsonInteger<int>(json::parse("null")), std::nullopt);
}

}  // namespace
}  // namespace strata
