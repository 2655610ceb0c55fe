// retrying_block_io_test.cc: RetryingBlockIo over FaultyBlockIo over
// MemoryBlockIo: a transient fault (EIO, short read, short write) is retried
// and the bytes arrive; a lasting one fails after exactly `attempts` tries,
// saying so; errors that no retry changes (a full disk) return at once; and
// STRATA_TEST_BLOCK_IO_FAULTS's text parses into the spec it names.
#include "tiers/nvme/retrying_block_io.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/fault/fault_env.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/nvme/memory_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

constexpr uint64_t kRequest = 16 * 1024;

class RetryingBlockIoTest : public ::testing::Test {
 protected:
  RetryingBlockIoTest() {
    auto faulty = std::make_unique<FaultyBlockIo>(
        std::make_unique<MemoryBlockIo>(1, 1 << 20), FaultSpec{});
    faulty_ = faulty.get();
    // No sleeping in a test: the backoff's length is not what is tested.
    io_ = std::make_unique<RetryingBlockIo>(
        std::move(faulty), RetryPolicy{.attempts = 3, .backoff_seconds = 0});
    FillPattern(data_.data(), 2 * kRequest, 1);
  }

  // Writes then reads back two requests in one batch each.
  absl::Status Write() {
    const IoRequest r[2] = {
        {IoOp::kWrite, 0, 0, data_.data(), kRequest},
        {IoOp::kWrite, 0, kRequest, data_.data() + kRequest, kRequest}};
    return io_->Run(r);
  }
  absl::Status Read() {
    const IoRequest r[2] = {
        {IoOp::kRead, 0, 0, back_.data(), kRequest},
        {IoOp::kRead, 0, kRequest, back_.data() + kRequest, kRequest}};
    return io_->Run(r);
  }

  FaultyBlockIo* faulty_;
  std::unique_ptr<RetryingBlockIo> io_;
  std::vector<char> data_ = std::vector<char>(2 * kRequest);
  std::vector<char> back_ = std::vector<char>(2 * kRequest);
};

TEST_F(RetryingBlockIoTest, TransientFaultsAreRetriedAndTheBytesArrive) {
  for (FaultKind kind :
       {FaultKind::kEio, FaultKind::kShortWrite, FaultKind::kShortRead}) {
    std::fill(back_.begin(), back_.end(), 0);
    faulty_->set_spec({.nth = 2, .kind = kind});  // the batch's second one
    ASSERT_TRUE(Write().ok());
    ASSERT_TRUE(Read().ok());
    EXPECT_TRUE(MatchesPattern(back_.data(), 2 * kRequest, 1));
  }
  EXPECT_EQ(faulty_->injected(), 3u);
  // Each failed batch ran its two requests again, one by one.
  EXPECT_EQ(io_->retries(), 6u);
}

TEST_F(RetryingBlockIoTest, LastingFaultFailsAfterEveryAttempt) {
  faulty_->set_spec({.from = 1, .ops = FaultOps::kReads});
  ASSERT_TRUE(Write().ok());
  const absl::Status status = Read();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("after 3 attempts"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("(EIO)"), std::string::npos) << status;
  // The batch, then the first request twice more; it stops there.
  EXPECT_EQ(io_->retries(), 2u);
  EXPECT_EQ(faulty_->injected(), 4u);
}

TEST_F(RetryingBlockIoTest, FullDiskIsNotRetried) {
  faulty_->set_spec({.nth = 1, .kind = FaultKind::kEnospc});
  EXPECT_TRUE(absl::IsResourceExhausted(Write()));
  EXPECT_EQ(io_->retries(), 0u);
}

TEST_F(RetryingBlockIoTest, OneAttemptMeansNoRetry) {
  auto faulty = std::make_unique<FaultyBlockIo>(
      std::make_unique<MemoryBlockIo>(1, 1 << 20), FaultSpec{.nth = 1});
  RetryingBlockIo once(std::move(faulty), RetryPolicy{.attempts = 1});
  const IoRequest r{IoOp::kWrite, 0, 0, data_.data(), kRequest};
  EXPECT_TRUE(absl::IsUnavailable(once.Run({&r, 1})));
  EXPECT_EQ(once.retries(), 0u);
  EXPECT_EQ(once.engine_name(), "faulty(memory)");
}

TEST(FaultEnvTest, ParsesEveryKey) {
  absl::StatusOr<FaultSpec> spec = ParseFaultSpec(
      "seed=7,rate=0.25,nth=3,from=40,ops=reads,kind=short-read");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->rate, 0.25);
  EXPECT_EQ(spec->nth, 3u);
  EXPECT_EQ(spec->from, 40u);
  EXPECT_EQ(spec->ops, FaultOps::kReads);
  EXPECT_EQ(spec->kind, FaultKind::kShortRead);
  absl::StatusOr<FaultSpec> empty = ParseFaultSpec("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->rate, 0.0);
  EXPECT_EQ(empty->kind, FaultKind::kEio);
}

TEST(FaultEnvTest, RefusesWhatItCannotRead) {
  for (const char* bad : {"rate=2", "rate=x", "kind=melt", "ops=h2d", "seed",
                          "colour=red", "nth=-1"}) {
    absl::StatusOr<FaultSpec> spec = ParseFaultSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(spec.status()));
    EXPECT_NE(spec.status().message().find(kBlockIoFaultsEnv),
              std::string::npos);
    EXPECT_NE(spec.status().message().find(bad), std::string::npos)
        << spec.status();
  }
}

}  // namespace
}  // namespace strata
