// tokenizer_test.cc: the byte tokenizer, and SentencePiece BPE trained on a
// small synthetic text: round trips, determinism across training runs, the
// model cache, and its errors.
#include "train/data/tokenizer.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "train/data/bpe_tokenizer.h"
#include "train/io/atomic_file.h"

namespace strata::train {
namespace {

using ::testing::HasSubstr;

// Every ASCII byte (NUL too), multi-byte UTF-8 the training text lacks, and
// the whitespace a normalising tokenizer would change.
const std::string& HardText() {
  static const std::string text = [] {
    std::string s = "  In the beginning\tGod  created\n\nthe heaven. ";
    s += "Caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 lord\r\n";
    for (int b = 0; b < 128; ++b) s.push_back(static_cast<char>(b));
    return s;
  }();
  return text;
}

TEST(ByteTokenizerTest, EveryByteRoundTrips) {
  const auto t = MakeByteTokenizer();
  EXPECT_EQ(t->name(), "byte");
  EXPECT_EQ(t->vocab_size(), 256);
  EXPECT_EQ(t->id(), kByteTokenizerId);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = t->Encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(t->Decode(ids), all);
}

TEST(ByteTokenizerTest, DecodeSkipsIdsOutsideTheVocabulary) {
  const std::vector<int32_t> ids = {'h', -1, 'i', 256, 1 << 20};
  EXPECT_EQ(MakeByteTokenizer()->Decode(ids), "hi");
}

class BpeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    text_path_ = dir_.path() + "/train.txt";
    testing::WriteTestFile(text_path_, testing::SyntheticText(400, 1));
  }
  std::string Cache(const std::string& name) const {
    return dir_.path() + "/" + name;
  }

  testing::TempDir dir_;
  std::string text_path_;
};

TEST_F(BpeTest, RoundTripsAnyText) {
  auto t = LoadOrTrainBpe(text_path_, Cache("a"), 512, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->name(), "bpe:512");
  EXPECT_EQ((*t)->vocab_size(), 512);
  const std::string line = "The lord said unto them, Behold the light.\n";
  const std::vector<int32_t> ids = (*t)->Encode(line);
  EXPECT_LT(ids.size(), line.size() / 2) << "BPE should merge common words";
  EXPECT_EQ((*t)->Decode(ids), line);
  EXPECT_EQ((*t)->Decode((*t)->Encode(HardText())), HardText());
  for (int32_t id : (*t)->Encode(HardText())) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 512);
  }
}

// The two documented exceptions to the round trip (tokenizer.h).
TEST_F(BpeTest, InvalidUtf8AndTheSpaceMarkerDoNotRoundTrip) {
  auto t = LoadOrTrainBpe(text_path_, Cache("a"), 512, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->Decode((*t)->Encode("a\xff\x80"
                                      "b")),
            "a\xef\xbf\xbd\xef\xbf\xbd"
            "b");
  EXPECT_EQ((*t)->Decode((*t)->Encode("a\xe2\x96\x81"
                                      "b")),
            "a b");
}

TEST_F(BpeTest, TrainingTwiceGivesTheSameVocabulary) {
  auto a = LoadOrTrainBpe(text_path_, Cache("a"), 512, 7);
  auto b = LoadOrTrainBpe(text_path_, Cache("b"), 512, 7);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->id(), (*b)->id());
  const std::string name = BpeModelFileName(512, 7);
  EXPECT_EQ(name, "bpe-v512-seed7.model");
  auto bytes_a = ReadWholeFile(Cache("a") + "/" + name);
  auto bytes_b = ReadWholeFile(Cache("b") + "/" + name);
  ASSERT_TRUE(bytes_a.ok()) << bytes_a.status();
  ASSERT_TRUE(bytes_b.ok()) << bytes_b.status();
  EXPECT_EQ(*bytes_a, *bytes_b);
  EXPECT_NE((*a)->id(), kByteTokenizerId);
}

TEST_F(BpeTest, TheCacheIsLoadedNotRetrained) {
  auto trained = LoadOrTrainBpe(text_path_, Cache("a"), 512, 0);
  ASSERT_TRUE(trained.ok()) << trained.status();
  // No training text: only the cached model can answer.
  auto cached = LoadOrTrainBpe(Cache("absent.txt"), Cache("a"), 512, 0);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ((*cached)->id(), (*trained)->id());
  // Another size is another file, which needs the text.
  auto other = LoadOrTrainBpe(Cache("absent.txt"), Cache("a"), 600, 0);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(other.status().message(), HasSubstr("absent.txt"));
}

TEST_F(BpeTest, ACorruptCachedModelIsAnErrorNamingIt) {
  const std::string path = Cache("a") + "/" + BpeModelFileName(512, 0);
  ASSERT_TRUE(MakeDirectories(Cache("a")).ok());
  testing::WriteTestFile(path, "not a model");
  auto t = LoadOrTrainBpe(text_path_, Cache("a"), 512, 0);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(t.status().message(), HasSubstr(path));
  EXPECT_THAT(t.status().message(), HasSubstr("delete it"));
}

TEST_F(BpeTest, VocabularySizesOutsideTheRangeAreRefused) {
  for (int size : {0, 256, kMaxBpeVocab + 1}) {
    auto t = LoadOrTrainBpe(text_path_, Cache("a"), size, 0);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << size;
  }
  EXPECT_FALSE(std::filesystem::exists(Cache("a")));
}

TEST_F(BpeTest, AVocabularyTooLargeForTheTextSaysSo) {
  auto t = LoadOrTrainBpe(text_path_, Cache("a"), 100000, 0);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr(text_path_));
}

}  // namespace
}  // namespace strata::train
