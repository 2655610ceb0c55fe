// lm_data_test.cc: the language-model corpus end to end — verse references
// stripped, the KJV read through bible(1) (skipped without bible-kjv), the
// line split, PrepareLmCorpus's cache (built once, reused, a corrupt shard
// reported), and the batch samplers' determinism and target shift.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "train/data/corpus.h"
#include "train/data/lm_batcher.h"
#include "train/data/lm_corpus.h"
#include "train/data/token_shard.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST(CorpusTest, StripsVerseReferences) {
  std::string_view text;
  ASSERT_TRUE(StripVerseReference("Ge1:1 In the beginning", &text));
  EXPECT_EQ(text, "In the beginning");
  ASSERT_TRUE(StripVerseReference("1Sa3:4 That the LORD", &text));
  EXPECT_EQ(text, "That the LORD");
  ASSERT_TRUE(StripVerseReference("Rev22:21 The grace", &text));
  EXPECT_EQ(text, "The grace");
  for (const char* bad : {"In the beginning", "Ge1 x", "Ge1: x", "1:1 x",
                          "Ge1:1", "Ge1:1x", ""}) {
    EXPECT_FALSE(StripVerseReference(bad, &text)) << bad;
  }
}

TEST(CorpusTest, ReadsTheKjv) {
  auto kjv = ReadKjv();
  if (absl::IsFailedPrecondition(kjv.status())) {
    GTEST_SKIP() << "bible(1) is not installed: " << kjv.status();
  }
  ASSERT_TRUE(kjv.ok()) << kjv.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*kjv, '\n');
  ASSERT_EQ(lines.back(), "");  // every verse ends in '\n'
  lines.pop_back();
  ASSERT_EQ(int64_t(lines.size()), kKjvVerses);
  EXPECT_EQ(lines.front(),
            "In the beginning God created the heaven and the earth.");
  EXPECT_EQ(lines.back(),
            "The grace of our Lord Jesus Christ be with you all. Amen.");
  for (absl::string_view line : lines) {
    std::string_view unused;
    ASSERT_FALSE(StripVerseReference({line.data(), line.size()}, &unused))
        << line;
  }
  EXPECT_EQ(TrainLineCount(kKjvVerses), 27992);
}

TEST(CorpusTest, AMissingBibleSaysWhichPackageToInstall) {
  auto kjv = ReadKjv("/nonexistent/bible");
  EXPECT_EQ(kjv.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(kjv.status().message(),
              HasSubstr("install the Debian package bible-kjv "
                        "(scripts/setup.sh does)"));
}

TEST(CorpusTest, TheLastTenthIsValidation) {
  EXPECT_EQ(TrainLineCount(2), 1);
  EXPECT_EQ(TrainLineCount(19), 18);
  EXPECT_EQ(TrainLineCount(20), 18);
  testing::TempDir dir;
  std::string text;
  for (int i = 0; i < 20; ++i) text += "line " + std::to_string(i) + "\n";
  text.pop_back();  // a last line without '\n' still counts
  std::istringstream scan_in(text);
  auto scan = ScanCorpus(scan_in, "t");
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_EQ(scan->lines, 20);
  std::istringstream in(text);
  const std::string train = dir.path() + "/train.txt";
  const std::string validation = dir.path() + "/validation.txt";
  ASSERT_TRUE(WriteCorpusSplit(in, 18, train, validation).ok());
  auto t = ReadWholeFile(train);
  auto v = ReadWholeFile(validation);
  ASSERT_TRUE(t.ok() && v.ok());
  EXPECT_EQ(*t + *v, text + "\n");
  EXPECT_EQ(*v, "line 18\nline 19\n");
}

TEST(CorpusTest, AOneLineCorpusIsRefused) {
  std::istringstream in("only\n");
  EXPECT_EQ(ScanCorpus(in, "tiny").status().code(),
            absl::StatusCode::kInvalidArgument);
}

class PrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = dir_.path() + "/my corpus.txt";
    testing::WriteTestFile(corpus_, testing::SyntheticText(300, 3));
    options_.corpus_path = corpus_;
    options_.cache_dir = dir_.path() + "/cache";
  }
  // All tokens of `reader`.
  static std::vector<int32_t> All(const TokenShardReader& reader) {
    std::vector<int32_t> t(reader.token_count());
    EXPECT_TRUE(reader.Read(0, t.size(), t.data()).ok());
    return t;
  }

  testing::TempDir dir_;
  std::string corpus_;
  LmCorpusOptions options_;
};

TEST_F(PrepareTest, ByteShardsHoldTheSplitText) {
  auto corpus = PrepareLmCorpus(options_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->tokenizer->name(), "byte");
  EXPECT_THAT(corpus->dir, HasSubstr("/cache/lm/my_corpus-"));
  EXPECT_THAT(corpus->train_shard_path, HasSubstr("/byte/train.tok"));
  const std::string text = testing::SyntheticText(300, 3);
  const std::string decoded =
      corpus->tokenizer->Decode(All(*corpus->train)) +
      corpus->tokenizer->Decode(All(*corpus->validation));
  EXPECT_EQ(decoded, text);
  EXPECT_EQ(corpus->train_tokens() + corpus->validation_tokens(),
            int64_t(text.size()));
}

TEST_F(PrepareTest, BpeShardsDecodeToTheSplitText) {
  options_.tokenizer = "bpe:400";
  auto corpus = PrepareLmCorpus(options_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->tokenizer->name(), "bpe:400");
  EXPECT_THAT(corpus->train_shard_path, HasSubstr("/bpe-v400-seed0/"));
  EXPECT_TRUE(
      fs::exists(fs::path(corpus->dir).parent_path() / "bpe-v400-seed0.model"));
  auto validation_text =
      ReadWholeFile(fs::path(corpus->dir).parent_path() / "validation.txt");
  ASSERT_TRUE(validation_text.ok());
  EXPECT_EQ(corpus->tokenizer->Decode(All(*corpus->validation)),
            *validation_text);
  EXPECT_LT(corpus->validation_tokens(), int64_t(validation_text->size()));
}

TEST_F(PrepareTest, TheCacheIsReusedAndAMissingShardRebuilt) {
  auto first = PrepareLmCorpus(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  const auto written = fs::last_write_time(first->validation_shard_path);
  const std::vector<int32_t> train = All(*first->train);
  fs::remove(first->train_shard_path);
  auto second = PrepareLmCorpus(options_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(fs::last_write_time(second->validation_shard_path), written);
  EXPECT_EQ(All(*second->train), train);
}

TEST_F(PrepareTest, ACorruptCachedShardIsAnErrorNotARebuild) {
  auto first = PrepareLmCorpus(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string shard = first->validation_shard_path;
  first->validation.reset();
  fs::resize_file(shard, fs::file_size(shard) - 1);
  auto second = PrepareLmCorpus(options_);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(second.status().message(), HasSubstr(shard));
  EXPECT_THAT(second.status().message(), HasSubstr("delete it to rebuild"));
}

TEST_F(PrepareTest, AnEditedCorpusGetsItsOwnDirectory) {
  auto first = PrepareLmCorpus(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  testing::WriteTestFile(corpus_, testing::SyntheticText(300, 4));
  auto second = PrepareLmCorpus(options_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(first->dir, second->dir);
}

TEST_F(PrepareTest, BadOptionsAreRefused) {
  options_.tokenizer = "bpe:lots";
  auto corpus = PrepareLmCorpus(options_);
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corpus.status().message(), HasSubstr("bpe:N"));
  options_.tokenizer = "byte";
  options_.corpus_path = dir_.path() + "/absent.txt";
  corpus = PrepareLmCorpus(options_);
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(corpus.status().message(), HasSubstr("absent.txt"));
}

// A shard whose token at position i is i % 60000, so a window's tokens say
// where it starts.
class BatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = dir_.path() + "/s.tok";
    auto writer = TokenShardWriter::Create(path, 60000, 1);
    ASSERT_TRUE(writer.ok());
    std::vector<int32_t> tokens(kTokens);
    for (int i = 0; i < kTokens; ++i) tokens[i] = i % 60000;
    ASSERT_TRUE((*writer)->Append(tokens).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    auto reader = TokenShardReader::Open(path, 60000, 1);
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = std::move(*reader);
  }
  static constexpr int kTokens = 5000;
  testing::TempDir dir_;
  std::unique_ptr<TokenShardReader> reader_;
};

TEST_F(BatcherTest, TargetsAreTheNextTokens) {
  constexpr int64_t B = 4, T = 16;
  auto batcher = LmBatcher::Create(reader_.get(), B, T, 9);
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  std::vector<int32_t> in(B * T), out(B * T);
  for (int step = 0; step < 50; ++step) {
    ASSERT_TRUE(batcher->Next(in.data(), out.data()).ok());
    for (int64_t b = 0; b < B; ++b) {
      const int32_t start = in[b * T];
      ASSERT_LE(start + T, kTokens - 1) << "window ends past the shard";
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(in[b * T + t], start + t);
        EXPECT_EQ(out[b * T + t], start + t + 1);
      }
    }
  }
}

TEST_F(BatcherTest, TheSameSeedGivesTheSameBatches) {
  constexpr int64_t B = 3, T = 8;
  auto a = LmBatcher::Create(reader_.get(), B, T, 5);
  auto b = LmBatcher::Create(reader_.get(), B, T, 5);
  auto c = LmBatcher::Create(reader_.get(), B, T, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<int32_t> ia(B * T), ta(B * T), ib(B * T), tb(B * T), ic(B * T),
      tc(B * T);
  bool differs = false;
  for (int step = 0; step < 10; ++step) {
    ASSERT_TRUE(a->Next(ia.data(), ta.data()).ok());
    ASSERT_TRUE(b->Next(ib.data(), tb.data()).ok());
    ASSERT_TRUE(c->Next(ic.data(), tc.data()).ok());
    EXPECT_EQ(ia, ib);
    EXPECT_EQ(ta, tb);
    differs |= ia != ic;
  }
  EXPECT_TRUE(differs) << "another seed should give other offsets";
}

TEST_F(BatcherTest, EveryOffsetIsReachable) {
  // A shard of T+3 tokens has three window offsets; all should be drawn.
  auto batcher = LmBatcher::Create(reader_.get(), 1, kTokens - 3, 1);
  ASSERT_TRUE(batcher.ok());
  std::vector<int32_t> in(kTokens - 3), out(kTokens - 3);
  std::vector<bool> seen(3);
  for (int step = 0; step < 60; ++step) {
    ASSERT_TRUE(batcher->Next(in.data(), out.data()).ok());
    ASSERT_LT(in[0], 3);
    seen[in[0]] = true;
  }
  EXPECT_EQ(seen, std::vector<bool>(3, true));
}

TEST_F(BatcherTest, ATooShortShardIsRefused) {
  auto batcher = LmBatcher::Create(reader_.get(), 1, kTokens, 1);
  EXPECT_EQ(batcher.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(batcher.status().message(), HasSubstr(reader_->path()));
  EXPECT_TRUE(LmBatcher::Create(reader_.get(), 1, kTokens - 1, 1).ok());
}

TEST_F(BatcherTest, ValidationWindowsTileTheShardInOrder) {
  constexpr int64_t T = 100;
  auto windows = ValidationWindows::Create(reader_.get(), T, 0);
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_EQ(windows->count(), (kTokens - 1) / T);  // 49: 4999 predictions
  std::vector<int32_t> in(T), out(T);
  for (int64_t i = 0; i < windows->count(); ++i) {
    ASSERT_TRUE(windows->Get(i, in.data(), out.data()).ok());
    EXPECT_EQ(in[0], i * T);
    EXPECT_EQ(out[T - 1], (i + 1) * T);
  }
  EXPECT_EQ(windows->Get(windows->count(), in.data(), out.data()).code(),
            absl::StatusCode::kOutOfRange);
  auto capped = ValidationWindows::Create(reader_.get(), T, 250);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->count(), 2);
  EXPECT_FALSE(ValidationWindows::Create(reader_.get(), kTokens, 0).ok());
}

}  // namespace
}  // namespace strata::train
