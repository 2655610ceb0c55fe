// faulty_block_io_test.cc: FaultyBlockIo over MemoryBlockIo: each fault
// kind's status and effect on the bytes, the op filter, rates, the nth
// request, reproducibility by seed, changing the spec at run time, and the
// gate holding a batch in flight.
#include "tiers/fault/faulty_block_io.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/nvme/memory_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

constexpr uint64_t kRequest = 16 * 1024;
constexpr uint64_t kFileBytes = 1 << 20;

class FaultyBlockIoTest : public ::testing::Test {
 protected:
  FaultyBlockIoTest() {
    auto memory = std::make_unique<MemoryBlockIo>(2, kFileBytes);
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

  // File `i` as the engine holds it, as chars.
  std::vector<char> File(int i) const {
    std::vector<std::byte> bytes = memory_->Contents(i);
    return std::vector<char>(
        reinterpret_cast<const char*>(bytes.data()),
        reinterpret_cast<const char*>(bytes.data()) + bytes.size());
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
  EXPECT_EQ(File(0)[0], 0);
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

TEST_F(FaultyBlockIoTest, ShortReadIsUnavailableAfterReadingHalf) {
  ASSERT_TRUE(Write(0).ok());
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kShortRead});
  const absl::Status status = Read(0);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;  // transient: retry
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
  EXPECT_TRUE(MatchesPattern(File(0).data(), kRequest / 2, 1));
  EXPECT_FALSE(MatchesPattern(File(0).data(), kRequest, 1));
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
  EXPECT_EQ(faulty_->Run(writes).code(),
            FaultyBlockIo::InjectedCode(FaultKind::kEio));
  const std::vector<char> file = File(1);
  EXPECT_EQ(std::memcmp(file.data(), bufs.data(), kRequest), 0);
  EXPECT_EQ(file[kRequest], 0);  // the faulted one
  EXPECT_EQ(std::memcmp(file.data() + 2 * kRequest, bufs.data() + 2 * kRequest,
                        2 * kRequest),
            0);
}

// Which of `count` single-request writes fail under `spec`.
std::vector<bool> FaultPositions(const FaultSpec& spec, int count) {
  FaultyBlockIo faulty(std::make_unique<MemoryBlockIo>(1, kFileBytes), spec);
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

// InjectedCode(kind) is what Run returns for that kind: the model test's
// list of acceptable codes is built from it.
TEST_F(FaultyBlockIoTest, InjectedCodeIsWhatRunReturns) {
  ASSERT_TRUE(Write(0).ok());
  struct Case {
    FaultKind kind;
    bool read;
  };
  for (Case c :
       {Case{FaultKind::kEio, true}, Case{FaultKind::kEio, false},
        Case{FaultKind::kEnospc, false}, Case{FaultKind::kShortRead, true},
        Case{FaultKind::kShortWrite, false}, Case{FaultKind::kBitFlip, true}}) {
    faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = c.kind});
    const absl::Status status = c.read ? Read(0) : Write(0);
    EXPECT_EQ(status.code(), FaultyBlockIo::InjectedCode(c.kind)) << status;
  }
  EXPECT_EQ(FaultyBlockIo::InjectedCode(FaultKind::kShortRead),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(FaultyBlockIo::InjectedCode(FaultKind::kEnospc),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(FaultyBlockIo::InjectedCode(FaultKind::kShortWrite),
            FaultyBlockIo::InjectedCode(FaultKind::kEio));
}

TEST_F(FaultyBlockIoTest, DeviceOnlyOpsAndKindsMatchNoRequest) {
  for (FaultOps ops : {FaultOps::kH2D, FaultOps::kD2H}) {
    faulty_->set_spec(FaultSpec{.rate = 1.0, .ops = ops});
    EXPECT_TRUE(Write(0).ok());
    EXPECT_TRUE(Read(0).ok());
  }
  faulty_->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kTornCopy});
  EXPECT_TRUE(Write(0).ok());
  EXPECT_TRUE(Read(0).ok());
  EXPECT_EQ(faulty_->injected(), 0u);
}

// The gate parks a read before anything moves; writes pass meanwhile; the
// read runs once released, under the spec set while it waited.
TEST_F(FaultyBlockIoTest, GateHoldsAReadUntilReleased) {
  ASSERT_TRUE(Write(0).ok());
  Gate& gate = faulty_->gate();
  gate.Arm(GateOp::kNvmeRead);
  absl::Status read;
  std::thread reader([&] { read = Read(0); });
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead));
  EXPECT_EQ(back_[0], 0) << "the held read moved bytes";
  EXPECT_TRUE(Write(kRequest).ok());  // another op kind is not held
  EXPECT_EQ(gate.held(GateOp::kNvmeWrite), 0u);
  faulty_->set_spec(FaultSpec{.nth = 1, .ops = FaultOps::kReads});
  gate.Release(GateOp::kNvmeRead);
  reader.join();
  EXPECT_EQ(read.code(), FaultyBlockIo::InjectedCode(FaultKind::kEio));
  EXPECT_EQ(gate.held(GateOp::kNvmeRead), 1u);
  EXPECT_TRUE(Read(0).ok());  // disarmed by Release: passes
  EXPECT_TRUE(MatchesPattern(back_.data(), kRequest, 1));
  EXPECT_EQ(gate.held(GateOp::kNvmeRead), 1u);
}

// Arm(op, 2) holds two batches at once; one Release lets both go.
TEST_F(FaultyBlockIoTest, GateHoldsSeveralAndReleasesThemTogether) {
  Gate& gate = faulty_->gate();
  gate.Arm(GateOp::kNvmeWrite, 2);
  std::vector<std::thread> writers;
  for (int i = 0; i < 2; ++i) {
    writers.emplace_back([this, i] {
      std::vector<char> buf(kRequest);
      FillPattern(buf.data(), kRequest, 10 + i);
      const IoRequest r{IoOp::kWrite, 1, i * kRequest, buf.data(), kRequest};
      EXPECT_TRUE(faulty_->Run({&r, 1}).ok());
    });
  }
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeWrite, 2));
  EXPECT_EQ(File(1)[0], 0);
  gate.Release(GateOp::kNvmeWrite);
  for (std::thread& w : writers) w.join();
  EXPECT_EQ(gate.held(GateOp::kNvmeWrite), 2u);
  EXPECT_TRUE(MatchesPattern(File(1).data(), kRequest, 10));
  EXPECT_TRUE(MatchesPattern(File(1).data() + kRequest, kRequest, 11));
}

}  // namespace
}  // namespace strata
