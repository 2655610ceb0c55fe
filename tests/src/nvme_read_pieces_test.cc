// NVMe -> host reads of large tensors run in pieces, each hashed while the
// next is read (Mover::ReadVerifying): the bytes and checksum are those of
// one read, a flipped bit in any piece is DataLoss, and an I/O error midway
// fails the acquire with the NVMe copy intact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::testing::HasSubstr;
using State = Residency::State;

class NvmeReadPiecesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreSeams seams;
    seams.wrap_block_io = [this](std::unique_ptr<BlockIo> io) {
      auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
      io_ = f.get();
      return f;
    };
    StoreOptions options = ::strata::testing::SmallStoreOptions(
        dir_.path(), 4 * kMiB, 16 * kMiB, 64 * kMiB);
    options.nvme.io_attempts = 1;  // each fault reaches the store
    auto s = OpenStore(options, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    id_ = *store_->Create({.name = "big", .size_bytes = kSize});
    ASSERT_TRUE(store_->Write(id_, Pattern(kSize, 5).data(), kSize).ok());
    ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  }
  State HostState() {
    return store_->GetResidency(id_)->tiers[static_cast<int>(Tier::kHost)];
  }

  // Four pieces of ~1.25 MiB; 64 KiB blocks make 81 read requests.
  static constexpr uint64_t kSize = 5 * kMiB + 7;
  ::strata::testing::TempDir dir_;
  FaultyBlockIo* io_ = nullptr;
  std::unique_ptr<Store> store_;
  TensorId id_;
};

TEST_F(NvmeReadPiecesTest, PiecesReadTheWholeTensor) {
  auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(MatchesPattern(lease->data(), kSize, 5));
  EXPECT_EQ(store_->GetStats().checksum_failures, 0u);
}

TEST_F(NvmeReadPiecesTest, AFlippedBitInAnyPieceIsDataLoss) {
  for (uint64_t nth : {1, 30, 81}) {  // the first, a middle, the last request
    io_->set_spec(
        {.nth = nth, .ops = FaultOps::kReads, .kind = FaultKind::kBitFlip});
    auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kDataLoss) << nth;
    EXPECT_THAT(lease.status().message(), HasSubstr("checksum mismatch"));
    EXPECT_EQ(HostState(), State::kAbsent);
  }
  io_->set_spec({});
  auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(MatchesPattern(lease->data(), kSize, 5));
}

TEST_F(NvmeReadPiecesTest, AnIoErrorMidwayFailsTheAcquireAndKeepsTheCopy) {
  io_->set_spec({.nth = 40, .ops = FaultOps::kReads, .kind = FaultKind::kEio});
  auto failed = store_->Acquire(id_, Tier::kHost, Access::kRead);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable)
      << failed.status();
  EXPECT_EQ(HostState(), State::kAbsent);
  io_->set_spec({});
  std::vector<std::byte> out(kSize);
  ASSERT_TRUE(store_->Read(id_, out.data(), kSize).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), kSize, 5));
}

}  // namespace
}  // namespace strata
