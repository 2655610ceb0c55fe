// json_nesting_test.cc: nesting is counted outside strings only.
#include "base/json_nesting.h"

#include <string>

#include "gtest/gtest.h"

namespace strata {
namespace {

TEST(JsonNestingTest, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth(""), 0);
  EXPECT_EQ(JsonNestingDepth("3"), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[[{{{"})"), 1);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "\"[[[", "b": [[]]})"), 3);
  EXPECT_EQ(JsonNestingDepth(R"(["\\", [[]]])"), 3);  // the escape ends
  EXPECT_EQ(JsonNestingDepth("]]]][["), 2);  // closers never go below 0
  EXPECT_EQ(JsonNestingDepth(std::string(100000, '[')), 100000);
}

}  // namespace
}  // namespace strata
