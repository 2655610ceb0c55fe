// flag_suggest_test.cc: the edit distance behind "did you mean", and which
// names it offers and which it holds back.
#include "apps/cli/flag_suggest.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(EditDistanceTest, CountsEachKindOfEditOnce) {
  EXPECT_EQ(EditDistance("budget", "budget"), 0);
  EXPECT_EQ(EditDistance("budgte", "budget"), 1);   // a swap
  EXPECT_EQ(EditDistance("budgt", "budget"), 1);    // an insertion
  EXPECT_EQ(EditDistance("buddget", "budget"), 1);  // a deletion
  EXPECT_EQ(EditDistance("bxdget", "budget"), 1);   // a substitution
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(NearestNameTest, OffersTheNearestCloseName) {
  const std::vector<std::string> names = {"device", "device_budget",
                                          "host_budget", "nvme_budget"};
  EXPECT_EQ(NearestName("device_budgte", names), "device_budget");
  EXPECT_EQ(NearestName("host_budgt", names), "host_budget");
  EXPECT_EQ(NearestName("devic", names), "device");
  EXPECT_EQ(NearestName("zzzzzzzz", names), "");
  EXPECT_EQ(NearestName("x", {"ab"}), "ab");  // two edits always allowed
  EXPECT_EQ(NearestName("x", {"abc"}), "");
}

}  // namespace
}  // namespace strata
