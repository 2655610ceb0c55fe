// safetensors_header_test.cc: the .safetensors header reader follows the
// format's rules: a good file reads back whole, and each rule broken is a
// DataLoss naming what broke.
#include "train/io/safetensors_header.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"

namespace strata::train {
namespace {

using ::strata::testing::TempDir;
using ::strata::testing::WriteTestFile;
using ::testing::HasSubstr;

// A file: the length of `header`, `header`, then `data_bytes` bytes.
std::string File(const std::string& header, uint64_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  }
  return out + header + std::string(data_bytes, '\x01');
}

constexpr char kGood[] =
    R"({"__metadata__":{"format":"pt"},)"
    R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},)"
    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   )";

TEST(SafetensorsHeaderTest, AGoodFileReadsBackInDataOrder) {
  TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  WriteTestFile(path, File(kGood, 14));
  auto h = ReadSafetensorsHeader(path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->header_bytes, sizeof(kGood) - 1);
  EXPECT_EQ(h->data_bytes, 14u);
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "a");
  EXPECT_EQ(h->tensors[0].shape, std::vector<int64_t>{2});
  EXPECT_EQ(h->tensors[1].name, "b");
  EXPECT_EQ(h->tensors[1].dtype, "BF16");
  EXPECT_EQ(h->tensors[1].begin, 8u);
  EXPECT_EQ(h->tensors[1].end, 14u);
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST(SafetensorsHeaderTest, EachBrokenRuleIsDataLossNamingIt) {
  const struct {
    const char* header;
    uint64_t data;
    const char* says;
  } kCases[] = {
      {kGood, 13, "the file 13"},
      {kGood, 15, "the file 15"},
      {R"([1,2])", 0, "not a JSON object"},
      {R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4,
       "unknown dtype 'F33'"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
       "not a non-negative integer"},
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
       "do not hold its 12 bytes"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
       R"("data_offsets":[0,0]}})",
       0, "overflows 64 bits"},
      {R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
       3, "overlapping or a hole"},
      {R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3,
       "overlapping or a hole"},
      {R"({"a":{"dtype":"U8","shape":[2]}})", 2, "needs \"dtype\""},
      {R"({"a":5})", 0, "not an object"},
      {R"({"__metadata__":{"k":1}})", 0, "'k' is not a string"},
  };
  for (const auto& c : kCases) {
    auto h = DecodeSafetensorsHeader(c.header, c.data, "m.st");
    ASSERT_FALSE(h.ok()) << c.header;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss) << c.header;
    EXPECT_THAT(h.status().message(), HasSubstr(c.says)) << c.header;
    EXPECT_THAT(h.status().message(), HasSubstr("m.st")) << c.header;
  }
}

TEST(SafetensorsHeaderTest, ALengthPastTheFileOrTheLimitIsRefusedUnread) {
  TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  std::string file = File(kGood, 14);
  file[0] = static_cast<char>(file[0] + 100);  // past the file's end
  WriteTestFile(path, file);
  auto h = ReadSafetensorsHeader(path);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(h.status().message(), HasSubstr("a header of"));
  file.assign(8, '\xff');  // 2^64 - 1: never allocated
  WriteTestFile(path, file);
  EXPECT_EQ(ReadSafetensorsHeader(path).status().code(),
            absl::StatusCode::kDataLoss);
  WriteTestFile(path, "1234");
  EXPECT_THAT(ReadSafetensorsHeader(path).status().message(),
              HasSubstr("4 bytes long"));
  EXPECT_EQ(ReadSafetensorsHeader(dir.path() + "/none").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadSafetensorsHeader(dir.path()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SafetensorsHeaderTest, DTypeSizesAreTheFormats) {
  EXPECT_EQ(SafetensorsDTypeSize("BOOL"), 1);
  EXPECT_EQ(SafetensorsDTypeSize("BF16"), 2);
  EXPECT_EQ(SafetensorsDTypeSize("U32"), 4);
  EXPECT_EQ(SafetensorsDTypeSize("F64"), 8);
  EXPECT_EQ(SafetensorsDTypeSize("f32"), 0);
}

}  // namespace
}  // namespace strata::train
