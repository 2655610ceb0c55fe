// deep_json_test.cc: every reader of a user's JSON file refuses nesting
// deeper than kMaxJsonNesting with its usual error, before nlohmann::json's
// recursive writer (a manifest's checksum, a config's flags) would overflow
// the stack on it: 100,000 levels crashed DecodeManifest before the check.
#include <string>

#include "apps/cli/command_table.h"
#include "apps/cli/config_file.h"
#include "base/json_nesting.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strata/profile.h"
#include "tests/util/test_util.h"
#include "train/io/checkpoint_manifest.h"
#include "train/io/safetensors_header.h"

namespace strata {
namespace {

using ::strata::testing::TempDir;
using ::strata::testing::WriteTestFile;
using ::testing::HasSubstr;

// An object that passes each reader's first checks, with `levels` of
// arrays inside.
std::string Deep(int levels) {
  return R"({"format": "strata-checkpoint", "version": 1,)"
         R"( "strata_machine_profile": 1, "x": )" +
         std::string(levels, '[') + std::string(levels, ']') + "}";
}

TEST(DeepJsonTest, EveryReaderRefusesItWithItsOwnError) {
  const std::string deep = Deep(100000);
  auto manifest = train::DecodeManifest(deep, "m.json");
  EXPECT_EQ(manifest.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(manifest.status().message(), HasSubstr("deeper than 64"));
  EXPECT_EQ(train::ResealManifest(deep), deep);

  auto header = train::DecodeSafetensorsHeader(deep, 0, "m.safetensors");
  EXPECT_EQ(header.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(header.status().message(), HasSubstr("deeper than 64"));

  TempDir dir;
  const std::string path = dir.path() + "/deep.json";
  WriteTestFile(path, deep);
  auto profile = LoadMachineProfile(path);
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(profile.status().message(), HasSubstr("deeper than 64"));
  for (const CommandSpec& command : Commands()) {
    auto flags = LoadConfigFile(path, command, 1);
    EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(flags.status().message(), HasSubstr("deeper than 64"));
  }
}

TEST(DeepJsonTest, NestingAtTheLimitStillParses) {
  // The readers refuse it for other reasons (an unknown key, ...), never
  // for its depth.
  const std::string at_limit = Deep(kMaxJsonNesting - 1);
  ASSERT_EQ(JsonNestingDepth(at_limit), kMaxJsonNesting);
  auto manifest = train::DecodeManifest(at_limit, "m.json");
  EXPECT_THAT(manifest.status().message(), ::testing::Not(HasSubstr("deeper")));
  TempDir dir;
  WriteTestFile(dir.path() + "/c.json", at_limit);
  auto flags = LoadConfigFile(dir.path() + "/c.json", *FindCommand("train"), 1);
  EXPECT_THAT(flags.status().message(), ::testing::Not(HasSubstr("deeper")));
}

}  // namespace
}  // namespace strata
