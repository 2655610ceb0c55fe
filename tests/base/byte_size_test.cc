#include "base/byte_size.h"

#include <gtest/gtest.h>

#include "strata/options.h"

namespace strata {
namespace {

TEST(ByteSizeTest, ParsesUnits) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64KiB"), 65536u);
  EXPECT_EQ(*ParseByteSize("256MiB"), 256u << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), uint64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("2g"), uint64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("1.5GB"), 1500000000u);
  EXPECT_EQ(*ParseByteSize(" 3 mib "), 3u << 20);
}

TEST(ByteSizeTest, RefusesNonsense) {
  for (const char* bad : {"", "-1", "12XB", "MiB", "1e30", "abc", "nan"}) {
    auto r = ParseByteSize(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ByteSizeTest, SaysWhenASizeIsTooLarge) {
  EXPECT_EQ(*ParseByteSize("2PiB"), uint64_t{2} << 50);
  EXPECT_EQ(*ParseByteSize("1EiB"), uint64_t{1} << 60);
  EXPECT_EQ(*ParseByteSize("9223372036854775807"),
            uint64_t{9223372036854775807});
  EXPECT_TRUE(ParseByteSize("7.99999999EiB").ok());
  for (const char* big : {"16EiB", "8EiB", "9223372036854775808",
                          "99999999999999999999", "1e30"}) {
    const absl::StatusOr<uint64_t> r = ParseByteSize(big);
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << big;
    EXPECT_NE(r.status().message().find("too large a byte size (it must be "
                                        "below 8 EiB)"),
              std::string::npos)
        << r.status();
  }
}

TEST(ByteSizeTest, FormatsAndRoundTripsAsFlag) {
  EXPECT_EQ(FormatByteSize(256u << 20), "256 MiB");
  EXPECT_EQ(FormatByteSize(1536u << 20), "1.5 GiB");
  EXPECT_EQ(FormatByteSize(4097), "4.0 KiB");
  ByteSize size;
  std::string error;
  ASSERT_TRUE(
      AbslParseFlag(AbslUnparseFlag(ByteSize{64u << 20}), &size, &error));
  EXPECT_EQ(size.bytes, 64u << 20);
  EXPECT_FALSE(AbslParseFlag("lots", &size, &error));
  EXPECT_NE(error.find("not a byte size"), std::string::npos);
}

// "Raise --x to at least N": N parsed back is never below what was needed.
TEST(ByteSizeTest, AtLeastRoundsUpSoTheSuggestionSuffices) {
  EXPECT_EQ(FormatByteSizeAtLeast(54 * kMiB + 16 * 1024), "54.1 MiB");
  EXPECT_EQ(FormatByteSizeAtLeast(54 * kMiB), "54 MiB");
  EXPECT_EQ(FormatByteSizeAtLeast(20967424), "20 MiB");
  EXPECT_EQ(FormatByteSizeAtLeast(1000), "1000 B");
  for (uint64_t need : {uint64_t{56639233}, uint64_t{4097}, uint64_t{1} << 40,
                        (uint64_t{3} << 30) + 1, uint64_t{123456789}}) {
    const std::string text = FormatByteSizeAtLeast(need);
    absl::StatusOr<uint64_t> parsed = ParseByteSize(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_GE(*parsed, need) << text;
  }
}

// "HAVE is below the NEED": never two texts that read as enough.
TEST(ByteSizeTest, ShortfallNeverReadsAsEnough) {
  const ByteShortfall apart = FormatByteShortfall(16 * kMiB, 20 * kMiB + 1);
  EXPECT_EQ(apart.have, "16 MiB");
  EXPECT_EQ(apart.need, "20.1 MiB");
  // 51.99 MiB would print "52.0 MiB" against a need of "52 MiB": KiB.
  const ByteShortfall close =
      FormatByteShortfall(52 * kMiB - 10 * 1024, 52 * kMiB - 5 * 1024);
  EXPECT_EQ(close.have, "53238 KiB");
  EXPECT_EQ(close.need, "53243 KiB");
  const ByteShortfall closer =
      FormatByteShortfall(52 * kMiB - 1000, 52 * kMiB - 900);
  EXPECT_EQ(closer.have, "53247 KiB");
  EXPECT_EQ(closer.need, "53248 KiB");
}

}  // namespace
}  // namespace strata
