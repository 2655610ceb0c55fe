// token_shard_test.cc: token shards written and read back at both widths,
// the writer's atomic publish, and every way Open refuses a shard, each
// message naming the file and the fix.
#include "train/data/token_shard.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kVocabId = 0x1234;

// `n` tokens: a pattern that uses the top of a `vocab` vocabulary.
std::vector<int32_t> Tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = static_cast<int32_t>((i * 7919 + vocab - 1) % vocab);
  }
  return t;
}

absl::Status WriteShard(const std::string& path,
                        const std::vector<int32_t>& tokens, int64_t vocab) {
  auto writer = TokenShardWriter::Create(path, vocab, kVocabId);
  if (!writer.ok()) return writer.status();
  // Several appends, so the stream crosses buffer boundaries mid-call.
  const size_t third = tokens.size() / 3;
  for (size_t at = 0; at < tokens.size(); at += third + 1) {
    const size_t n = std::min(third + 1, tokens.size() - at);
    if (auto s = (*writer)->Append({tokens.data() + at, n}); !s.ok()) return s;
  }
  return (*writer)->Finish();
}

// Overwrites the byte of `path` at `offset` with `value`.
void Poke(const std::string& path, int64_t offset, char value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.put(value);
}

// Inverts one bit of the byte of `path` at `offset`.
void FlipBit(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get());
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x10));
}

class TokenShardTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name = "s.tok") const {
    return dir_.path() + "/" + name;
  }
  // Writes a valid shard of `n` tokens at Path().
  void WriteGood(int64_t n = 1000, int64_t vocab = 300) {
    ASSERT_TRUE(WriteShard(Path(), Tokens(n, vocab), vocab).ok());
  }
  absl::Status OpenStatus(int64_t vocab = 300, uint64_t id = kVocabId) {
    return TokenShardReader::Open(Path(), vocab, id).status();
  }

  testing::TempDir dir_;
};

void ExpectRoundTrip(const std::string& path, int64_t vocab, uint32_t width) {
  // 700k tokens: over the writer's 1 MiB buffer at either width.
  const std::vector<int32_t> tokens = Tokens(700'000, vocab);
  ASSERT_TRUE(WriteShard(path, tokens, vocab).ok());
  EXPECT_EQ(std::filesystem::file_size(path),
            kTokenShardHeaderBytes + tokens.size() * width);
  auto reader = TokenShardReader::Open(path, vocab, kVocabId);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->header().token_bytes, width);
  EXPECT_EQ((*reader)->header().vocab_id, kVocabId);
  EXPECT_EQ((*reader)->token_count(), int64_t(tokens.size()));
  std::vector<int32_t> all(tokens.size());
  ASSERT_TRUE((*reader)->Read(0, all.size(), all.data()).ok());
  EXPECT_EQ(all, tokens);
  std::vector<int32_t> part(20000);  // crosses Read's 8192-token chunks
  ASSERT_TRUE((*reader)->Read(12345, part.size(), part.data()).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), tokens.begin() + 12345));
}

TEST_F(TokenShardTest, TwoByteTokensRoundTrip) {
  EXPECT_EQ(TokenWidthFor(65536), 2u);
  ExpectRoundTrip(Path(), 65536, 2);  // id 65535 is the widest 2-byte id
}

TEST_F(TokenShardTest, FourByteTokensRoundTrip) {
  EXPECT_EQ(TokenWidthFor(65537), 4u);
  ExpectRoundTrip(Path(), 100000, 4);
}

TEST_F(TokenShardTest, AnEmptyShardIsValid) {
  WriteGood(0);
  auto reader = TokenShardReader::Open(Path(), 300, kVocabId);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->token_count(), 0);
}

TEST_F(TokenShardTest, AnUnfinishedShardLeavesNoFile) {
  {
    auto writer = TokenShardWriter::Create(Path(), 300, kVocabId);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(Tokens(10, 300)).ok());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
}

TEST_F(TokenShardTest, FinishLeavesOnlyTheFinalName) {
  WriteGood();
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    names.push_back(e.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"s.tok"});
}

TEST_F(TokenShardTest, TokensOutsideTheVocabularyAreRefused) {
  auto writer = TokenShardWriter::Create(Path(), 300, kVocabId);
  ASSERT_TRUE(writer.ok());
  for (int32_t bad : {-1, 300}) {
    const std::vector<int32_t> t = {1, bad};
    const absl::Status s = (*writer)->Append(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(Path()));
  }
  EXPECT_EQ((*writer)->token_count(), 0);
}

TEST_F(TokenShardTest, AMissingShardIsNotFound) {
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(Path()));
}

TEST_F(TokenShardTest, BadMagicIsDataLoss) {
  WriteGood();
  Poke(Path(), 0, 'X');
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(Path()));
  EXPECT_THAT(s.message(), HasSubstr("magic"));
  EXPECT_THAT(s.message(), HasSubstr("delete it to rebuild"));
}

TEST_F(TokenShardTest, AFileShorterThanTheHeaderIsDataLoss) {
  testing::WriteTestFile(Path(), "STRATOK");
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(Path()));
}

TEST_F(TokenShardTest, ATruncatedShardIsDataLoss) {
  WriteGood();
  std::filesystem::resize_file(Path(), std::filesystem::file_size(Path()) - 1);
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(Path()));
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
  EXPECT_THAT(s.message(), HasSubstr("delete it to rebuild"));
}

TEST_F(TokenShardTest, AFlippedPayloadByteIsAChecksumMismatch) {
  WriteGood();
  FlipBit(Path(), kTokenShardHeaderBytes + 777);
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "corrupt shard " + Path() +
                             ": checksum mismatch; delete it to rebuild");
}

// Found by the token_shard fuzz target: a shard whose checksum holds but
// whose ids pass its vocabulary (made by hand, or by another tool) opened,
// and its ids would index past the embedding table.
TEST_F(TokenShardTest, AnIdOutsideTheVocabularyIsDataLossEvenWithItsChecksum) {
  // Written as a 400-token vocabulary, opened as the 300 its header is
  // then made to say, its checksum left right.
  ASSERT_TRUE(WriteShard(Path(), {5, 299, 350, 7}, 400).ok());
  Poke(Path(), 24, static_cast<char>(300 & 0xff));
  Poke(Path(), 25, static_cast<char>(300 >> 8));
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "corrupt shard " + Path() +
                             ": token 2 is id 350, outside its vocabulary of "
                             "300; delete it to rebuild");
}

// Found by the token_shard fuzz target: a header's vocabulary past 2^31
// let ids past int32 through, read back negative.
TEST_F(TokenShardTest, AVocabularyPastInt32IsDataLoss) {
  WriteGood(10, 300);
  Poke(Path(), 28, 0x04);  // vocab_size += 2^34
  const absl::Status s = OpenStatus(300 + (int64_t{1} << 34));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("outside [1, 2^31]"));
}

TEST_F(TokenShardTest, AnIdChangedAfterOpenIsDataLossWhenRead) {
  WriteGood(1000, 300);
  auto reader = TokenShardReader::Open(Path(), 300, kVocabId);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Poke(Path(), kTokenShardHeaderBytes + 2 * 10 + 1, 0x7f);  // token 10
  std::vector<int32_t> ids(20);
  const absl::Status s = (*reader)->Read(0, 20, ids.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("token 10 is id"));
}

TEST_F(TokenShardTest, AnotherVersionIsRefused) {
  WriteGood();
  Poke(Path(), 8, 2);
  const absl::Status s = OpenStatus();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr(Path()));
  EXPECT_THAT(s.message(), HasSubstr("version 2"));
}

TEST_F(TokenShardTest, ATooNarrowWidthIsDataLoss) {
  WriteGood(1000, 70000);  // 4-byte tokens
  Poke(Path(), 12, 2);
  EXPECT_EQ(OpenStatus(70000).code(), absl::StatusCode::kDataLoss);
}

TEST_F(TokenShardTest, AnotherVocabularyIsRefusedNamingBoth) {
  WriteGood();
  for (const auto& [vocab, id] :
       {std::pair<int64_t, uint64_t>{301, kVocabId}, {300, kVocabId + 1}}) {
    const absl::Status s = OpenStatus(vocab, id);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), HasSubstr(Path()));
    EXPECT_THAT(s.message(), HasSubstr("0000000000001234 (300 ids)"));
    EXPECT_THAT(s.message(), HasSubstr("delete it to rebuild"));
  }
}

TEST_F(TokenShardTest, ReadsOutsideTheShardAreOutOfRange) {
  WriteGood(100);
  auto reader = TokenShardReader::Open(Path(), 300, kVocabId);
  ASSERT_TRUE(reader.ok());
  int32_t out[2];
  EXPECT_EQ((*reader)->Read(99, 2, out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*reader)->Read(-1, 1, out).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE((*reader)->Read(98, 2, out).ok());
  EXPECT_TRUE((*reader)->Read(100, 0, out).ok());
}

TEST(TokenShardHeaderTest, EncodeDecodeRoundTrip) {
  TokenShardHeader h;
  h.token_bytes = 4;
  h.token_count = 0x0102030405060708ull;
  h.vocab_size = 70000;
  h.vocab_id = 0xfedcba9876543210ull;
  h.checksum = 42;
  const auto bytes = EncodeTokenShardHeader(h);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 8),
            std::string("STRATOK\0", 8));
  EXPECT_EQ(bytes[16], 0x08);  // little-endian
  TokenShardHeader back;
  ASSERT_TRUE(DecodeTokenShardHeader(bytes, &back));
  EXPECT_EQ(back.token_count, h.token_count);
  EXPECT_EQ(back.vocab_id, h.vocab_id);
  EXPECT_EQ(back.checksum, 42u);
}

}  // namespace
}  // namespace strata::train
