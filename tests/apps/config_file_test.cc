// config_file_test.cc: LoadConfigFile's refusals of files that are not
// configs, each InvalidArgument naming the file, never an exception.
#include "apps/cli/config_file.h"

#include <string>

#include "apps/cli/command_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace strata {
namespace {

using ::strata::testing::TempDir;
using ::strata::testing::WriteTestFile;
using ::testing::HasSubstr;

absl::Status Load(const std::string& text) {
  TempDir dir;
  const std::string path = dir.path() + "/run.json";
  WriteTestFile(path, text);
  return LoadConfigFile(path, *FindCommand("train"), 1).status();
}

// Found by the config_file fuzz target: nlohmann::json throws out_of_range,
// not parse_error, for a number past a double's range, and strata
// terminated on it.
TEST(ConfigFileTest, ANumberPastADoublesRangeIsRefused) {
  const absl::Status s = Load(R"({"lr": 1e999})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("run.json is not valid JSON"));
  EXPECT_THAT(s.message(), HasSubstr("number overflow"));
}

TEST(ConfigFileTest, TextThatIsNotJsonIsRefusedSayingWhere) {
  const absl::Status s = Load("{\"lr\": 0.1,\n  oops}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("line 2"));
}

TEST(ConfigFileTest, ADirectoryInPlaceOfTheFileIsRefused) {
  TempDir dir;
  auto flags = LoadConfigFile(dir.path(), *FindCommand("train"), 1);
  EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(flags.status().message(), HasSubstr("is a directory"));
}

}  // namespace
}  // namespace strata
