// faulty_block_io_test.cc: FaultyBlockIo over an in-memory BlockIo: each
// fault kind's status and effect on the bytes, the op filter, rates, the nth
// request, reproducibility by seed, and changing the spec at run time.
#include "tiers/fault/faulty_block_io.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/sync.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

constexpr uint64_t kRequest = 16 * 1024;
constexpr uint64_t kFileBytes = 1 << 20;

// One in-memory "file" per index; every request succeeds.
class MemoryBlockIo : public BlockIo {
 public:
  explicit MemoryBlockIo(int files)
      : files_(files, std::vector<char>(kFileBytes)) {}
  std::string_view engine_name() const override { return "memory"; }
  absl::Status Run(absl::Span<const IoRequest> requests) override {
    MutexLock lock(&mu_);
    for (const IoRequest& r : requests) {
      char* file = files_[r.file_index].data() + r.offset;
      if (r.op == IoOp::kRead) {
        std::memcpy(r.buf, file, r.bytes);
      } else {
        std::memcpy(file, r.buf, r.bytes);
      }
    }
    return absl::OkStatus();
  }
  const char* file(int i) const { return files_[i].data(); }

 private:
  Mutex mu_;
  std::vector<std::vector<char>> files_;
};

class FaultyBlockIoTest : public ::testing::Test {
 protected:
  FaultyBlockIoTest() {
    auto memory = std::make_unique<MemoryBlockIo>(2);
    memory_ = memory.get();
    faulty_ = std::make_unique<FaultyBlockIo>(std::move(memory), FaultSpec{});
    FillPattern(data_.data(), kRequest, 1);
  }

  absl::Status Write(uint64_t offset) {
    const IoRequest r{IoOp::kWrite, 0, offset, data_.data(), kRequest};
    return faulty_->Run({&r, 1});
  }
  absl::Status Read(uint64_t offset) {
    const IoRequest r{IoOp::kRead, 0, offset, back_.data(), kRequest};
    return faulty_->Run({&r, 1});
  }

  MemoryBlockIo* memory_;
  std::unique_ptr<FaultyBlockIo> faulty_;
  std::vector<char> data_ = std::vector<char>(kRequest);
  std::vector<char> back_ = std::vector<char>(kRequest);
};

TEST_F(FaultyBlockIoTest, NoFaultsPassThrough) {
  ASSERT_TRUE(Write(0).ok());
  ASSERT_TRUE(Read(0).ok());
  EXPECT_TRUE(MatchesPattern(back_.data(), kRequest, 1));
  EXPECT_EQ(faulty_->engine_name(), "faulty(memory)");
  EXPECT_EQ(faulty_->injected(), 0u);
}

TEST_F(FaultyBlockIoTest, EioIsUnavailableAndMovesNothing) {
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kEio});
  const absl::Status status = Write(0);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("(EIO)"), std::string::npos) << status;
  EXPECT_NE(status.message().find("nvme write file 0 offset 0"),
            std::string::npos)
      << status;
  EXPECT_EQ(memory_->file(0)[0], 0);
  EXPECT_EQ(faulty_->injected(), 1u);
}

TEST_F(FaultyBlockIoTest, EnospcIsResourceExhaustedNamingAFullDisk) {
  faulty_->set_spec(FaultSpec{
      .rate = 1.0, .ops = FaultOps::kWrites, .kind = FaultKind::kEnospc});
  const absl::Status status = Write(0);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_NE(status.message().find("(ENOSPC)"), std::string::npos) << status;
  EXPECT_NE(status.message().find("disk holding the swap file is full"),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("--nvme-budget"), std::string::npos)
      << status;
  EXPECT_TRUE(Read(0).ok());  // reads are not matched
  EXPECT_EQ(faulty_->injected(), 1u);
}

TEST_F(FaultyBlockIoTest, ShortReadIsDataLossAfterReadingHalf) {
  ASSERT_TRUE(Write(0).ok());
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kShortRead});
  const absl::Status status = Read(0);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("short read"), std::string::npos);
  EXPECT_TRUE(MatchesPattern(back_.data(), kRequest / 2, 1));
  EXPECT_EQ(back_[kRequest - 1], 0);  // the second half never arrived
  EXPECT_TRUE(Write(0).ok());         // writes are not matched
}

TEST_F(FaultyBlockIoTest, ShortWriteFailsAfterWritingHalf) {
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kShortWrite});
  const absl::Status status = Write(0);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_NE(status.message().find("short write"), std::string::npos);
  EXPECT_TRUE(MatchesPattern(memory_->file(0), kRequest / 2, 1));
  EXPECT_FALSE(MatchesPattern(memory_->file(0), kRequest, 1));
}

TEST_F(FaultyBlockIoTest, BitFlipReturnsOkWithOneBitWrong) {
  ASSERT_TRUE(Write(0).ok());
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kBitFlip});
  ASSERT_TRUE(Read(0).ok());
  int flipped = 0;
  for (uint64_t i = 0; i < kRequest; ++i) {
    flipped += std::popcount(static_cast<unsigned char>(back_[i] ^ data_[i]));
  }
  EXPECT_EQ(flipped, 1);
  EXPECT_EQ(faulty_->injected(), 1u);
}

TEST_F(FaultyBlockIoTest, RateZeroNeverInjects) {
  faulty_->set_spec(FaultSpec{.seed = 9, .rate = 0.0});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(Write(i % 8 * kRequest).ok());
  EXPECT_EQ(faulty_->injected(), 0u);
}

TEST_F(FaultyBlockIoTest, NthMatchingRequestFails) {
  faulty_->set_spec(FaultSpec{.nth = 3, .ops = FaultOps::kReads});
  ASSERT_TRUE(Write(0).ok());
  EXPECT_TRUE(Read(0).ok());
  EXPECT_TRUE(Read(0).ok());
  EXPECT_TRUE(Write(0).ok());  // not a match: does not count
  EXPECT_FALSE(Read(0).ok());
  EXPECT_TRUE(Read(0).ok());
  EXPECT_EQ(faulty_->injected(), 1u);
}

TEST_F(FaultyBlockIoTest, OtherRequestsOfABatchStillRun) {
  faulty_->set_spec(FaultSpec{.nth = 2});
  std::vector<char> bufs(4 * kRequest);
  FillPattern(bufs.data(), bufs.size(), 4);
  std::vector<IoRequest> writes;
  for (int i = 0; i < 4; ++i) {
    writes.push_back(IoRequest{IoOp::kWrite, 1, i * kRequest,
                               bufs.data() + i * kRequest, kRequest});
  }
  EXPECT_TRUE(absl::IsUnavailable(faulty_->Run(writes)));
  EXPECT_EQ(std::memcmp(memory_->file(1), bufs.data(), kRequest), 0);
  EXPECT_EQ(memory_->file(1)[kRequest], 0);  // the faulted one
  EXPECT_EQ(std::memcmp(memory_->file(1) + 2 * kRequest,
                        bufs.data() + 2 * kRequest, 2 * kRequest),
            0);
}

// Which of `count` single-request writes fail under `spec`.
std::vector<bool> FaultPositions(const FaultSpec& spec, int count) {
  FaultyBlockIo faulty(std::make_unique<MemoryBlockIo>(1), spec);
  std::vector<char> buf(kRequest);
  std::vector<bool> failed;
  for (int i = 0; i < count; ++i) {
    const IoRequest r{IoOp::kWrite, 0, 0, buf.data(), kRequest};
    failed.push_back(!faulty.Run({&r, 1}).ok());
  }
  return failed;
}

TEST(FaultyBlockIoSeedTest, SameSeedSamePositions) {
  const FaultSpec spec{.seed = 42, .rate = 0.3};
  const std::vector<bool> a = FaultPositions(spec, 300);
  EXPECT_EQ(a, FaultPositions(spec, 300));
  EXPECT_NE(a, FaultPositions(FaultSpec{.seed = 43, .rate = 0.3}, 300));
  const int failures = static_cast<int>(std::count(a.begin(), a.end(), true));
  EXPECT_GT(failures, 45);  // about 90 expected
  EXPECT_LT(failures, 150);
}

TEST_F(FaultyBlockIoTest, SetSpecTurnsFaultsOnLater) {
  ASSERT_TRUE(Write(0).ok());
  faulty_->set_spec(FaultSpec{.rate = 1.0, .ops = FaultOps::kReads});
  EXPECT_FALSE(Read(0).ok());
  faulty_->set_spec(FaultSpec{});
  EXPECT_TRUE(Read(0).ok());
  EXPECT_EQ(faulty_->injected(), 1u);
}

TEST_F(FaultyBlockIoTest, CountsAreExactUnderConcurrency) {
  faulty_->set_spec(FaultSpec{.seed = 5, .rate = 0.5});
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<char> buf(kRequest);
      for (int i = 0; i < 200; ++i) {
        const IoRequest r{IoOp::kRead, t % 2, 0, buf.data(), kRequest};
        if (!faulty_->Run({&r, 1}).ok()) ++failures[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(faulty_->injected(),
            static_cast<uint64_t>(failures[0] + failures[1] + failures[2] +
                                  failures[3]));
}

}  // namespace
}  // namespace strata
