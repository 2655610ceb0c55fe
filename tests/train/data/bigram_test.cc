// bigram_test.cc: the add-one bigram baseline against a value worked by
// hand, and its refusals.
#include "train/data/bigram.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "train/data/token_shard.h"

namespace strata::train {
namespace {

class BigramTest : public ::testing::Test {
 protected:
  std::unique_ptr<TokenShardReader> Shard(const std::string& name,
                                          const std::vector<int32_t>& tokens,
                                          int64_t vocab) {
    const std::string path = dir_.path() + "/" + name;
    auto writer = TokenShardWriter::Create(path, vocab, 1);
    EXPECT_TRUE(writer.ok());
    EXPECT_TRUE((*writer)->Append(tokens).ok());
    EXPECT_TRUE((*writer)->Finish().ok());
    auto reader = TokenShardReader::Open(path, vocab, 1);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return std::move(*reader);
  }
  testing::TempDir dir_;
};

// V = 3. Training 0 1 0 1 2 has the pairs (0,1) (1,0) (0,1) (1,2), so
// count(0) = 2, count(1) = 2, count(2) = 0 and count(0,1) = 2,
// count(1,2) = 1. Validation 0 1 2 2 scores three pairs:
//   P(1|0) = (2+1)/(2+3) = 3/5    -ln = 0.5108256
//   P(2|1) = (1+1)/(2+3) = 2/5    -ln = 0.9162907
//   P(2|2) = (0+1)/(0+3) = 1/3    -ln = 1.0986123
// mean = (ln(5/3) + ln(5/2) + ln 3) / 3 = ln(12.5) / 3 = 0.8419095 nats.
TEST_F(BigramTest, MatchesTheHandComputedLoss) {
  auto train = Shard("train.tok", {0, 1, 0, 1, 2}, 3);
  auto validation = Shard("validation.tok", {0, 1, 2, 2}, 3);
  auto loss = BigramBaselineLoss(*train, *validation, 3);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, std::log(12.5) / 3, 1e-12);
  EXPECT_NEAR(*loss, 0.8419095, 1e-7);
}

TEST_F(BigramTest, UnseenTextCostsLnV) {
  // Nothing learned: every probability is 1/V.
  auto train = Shard("train.tok", {7}, 50304);
  auto validation = Shard("validation.tok", {1, 2, 3, 50303}, 50304);
  auto loss = BigramBaselineLoss(*train, *validation, 50304);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, std::log(50304.0), 1e-9);
}

TEST_F(BigramTest, RefusesTooLittleValidationOrForeignTokens) {
  auto train = Shard("train.tok", {0, 1, 2}, 3);
  auto one = Shard("one.tok", {0}, 3);
  EXPECT_EQ(BigramBaselineLoss(*train, *one, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto validation = Shard("validation.tok", {0, 1}, 3);
  EXPECT_EQ(BigramBaselineLoss(*train, *validation, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata::train
