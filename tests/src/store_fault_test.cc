// Fault injection at the store level: each injected fault (EIO, ENOSPC, short
// read, short write, bit flip on NVMe; failed H2D/D2H copies) gives the
// documented Status (tiers/nvme/io_error.h), a failed prefetch is counted
// whatever its code, and the tensor's last valid copy stays intact and
// readable once the fault is gone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/race_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::testing::HasSubstr;
using ::testing::Not;
using State = Residency::State;

class StoreFaultTest : public ::testing::Test {
 protected:
  // The store's own error paths: retries off, so each injected fault
  // reaches the store (StoreRetryTest below has them on).
  virtual uint32_t IoAttempts() const { return 1; }

  void SetUp() override {
    StoreSeams seams;
    seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
      auto f = std::make_unique<FaultyDevice>(std::move(d));
      device_ = f.get();
      return f;
    };
    seams.wrap_block_io = [this](std::unique_ptr<BlockIo> io) {
      auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
      io_ = f.get();
      return f;
    };
    StoreOptions options = ::strata::testing::SmallStoreOptions(
        dir_.path(), 4 * kMiB, 4 * kMiB, 32 * kMiB);
    options.nvme.io_attempts = IoAttempts();
    options.nvme.io_retry_backoff_seconds = 0;  // no sleeping in tests
    auto s = OpenStore(options, seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    id_ = *store_->Create({.name = "w", .size_bytes = kSize});
    ASSERT_TRUE(store_->Write(id_, Pattern(kSize, 1).data(), kSize).ok());
  }

  State StateOn(Tier t) { return StateOf(id_, t); }
  State StateOf(TensorId id, Tier t) {
    return store_->GetResidency(id)->tiers[static_cast<int>(t)];
  }
  TensorId Make(uint64_t size, uint64_t seed) {
    absl::StatusOr<TensorId> id = store_->Create(
        {.name = "t" + std::to_string(seed), .size_bytes = size});
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(store_->Write(*id, Pattern(size, seed).data(), size).ok());
    return *id;
  }
  // Waits (at most 10 s) for the background prefetches to have failed `n`
  // times; returns the count then.
  uint64_t AwaitFailedPrefetches(uint64_t n) {
    for (int i = 0; i < 10000 && store_->GetStats().prefetch.failed < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return store_->GetStats().prefetch.failed;
  }
  // The tensor reads back as pattern `seed` with faults off.
  void ExpectIntact(uint64_t seed) {
    io_->set_spec({});
    device_->set_spec({});
    std::vector<std::byte> out(kSize);
    ASSERT_TRUE(store_->Read(id_, out.data(), kSize).ok());
    EXPECT_TRUE(MatchesPattern(out.data(), kSize, seed));
  }

  static constexpr uint64_t kSize = 300 * 1024 + 7;
  ::strata::testing::TempDir dir_;
  FaultyDevice* device_ = nullptr;
  FaultyBlockIo* io_ = nullptr;
  std::unique_ptr<Store> store_;
  TensorId id_;
};

TEST_F(StoreFaultTest, WriteBackErrorKeepsDirtyHostCopy) {
  for (FaultKind kind :
       {FaultKind::kEio, FaultKind::kEnospc, FaultKind::kShortWrite}) {
    io_->set_spec({.nth = 1, .ops = FaultOps::kWrites, .kind = kind});
    absl::Status s = store_->Evict(id_, Tier::kNvme);
    if (kind == FaultKind::kEnospc) {
      // A full disk, worded so that it cannot pass for a full tier.
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      EXPECT_THAT(s.message(), HasSubstr("NVMe directory '" + dir_.path() +
                                         "' is on a full disk"));
      EXPECT_THAT(s.message(), HasSubstr("lower --nvme-budget"));
      EXPECT_THAT(s.message(), Not(HasSubstr("tier full")));
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;  // EIO
      EXPECT_THAT(s.message(), HasSubstr("(EIO)"));
    }
    EXPECT_THAT(s.message(), HasSubstr("host -> nvme"));
    EXPECT_EQ(StateOn(Tier::kHost), State::kDirty);
    EXPECT_EQ(StateOn(Tier::kNvme), State::kAbsent);
    ExpectIntact(1);
  }
  EXPECT_GE(io_->injected(), 3u);
  EXPECT_GE(
      store_->GetStats().links[static_cast<int>(Link::kNvmeWrite)].failures,
      3u);
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  EXPECT_EQ(StateOn(Tier::kNvme), State::kClean);
}

TEST_F(StoreFaultTest, ReadErrorsLeaveNvmeCopyIntact) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  for (FaultKind kind : {FaultKind::kEio, FaultKind::kShortRead}) {
    io_->set_spec({.nth = 1, .ops = FaultOps::kReads, .kind = kind});
    auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
    // Both are transient: Unavailable, the caller may retry.
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kUnavailable)
        << lease.status();
    EXPECT_EQ(StateOn(Tier::kHost), State::kAbsent);
    EXPECT_EQ(StateOn(Tier::kNvme), State::kClean);
    EXPECT_EQ(store_->GetStats().tiers[1].used_bytes, 0u) << "leaked extent";
  }
  ExpectIntact(1);
}

TEST_F(StoreFaultTest, BitFlipIsDataLossNeverWrongData) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  io_->set_spec(
      {.nth = 1, .ops = FaultOps::kReads, .kind = FaultKind::kBitFlip});
  for (Tier tier : {Tier::kHost, Tier::kDevice}) {
    io_->set_spec(
        {.nth = 1, .ops = FaultOps::kReads, .kind = FaultKind::kBitFlip});
    auto lease = store_->Acquire(id_, tier, Access::kRead);
    EXPECT_EQ(lease.status().code(), absl::StatusCode::kDataLoss)
        << lease.status();
    EXPECT_THAT(lease.status().message(), HasSubstr("checksum mismatch"));
    EXPECT_EQ(StateOn(tier), State::kAbsent);
  }
  EXPECT_EQ(store_->GetStats().checksum_failures, 2u);
  ExpectIntact(1);
}

TEST_F(StoreFaultTest, FailedH2DLeavesHostCopy) {
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  auto lease = store_->Acquire(id_, Tier::kDevice, Access::kRead);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(lease.status().message(), HasSubstr("host -> device"));
  EXPECT_EQ(StateOn(Tier::kDevice), State::kAbsent);
  EXPECT_EQ(store_->GetStats().tiers[0].used_bytes, 0u);
  ExpectIntact(1);
}

TEST_F(StoreFaultTest, FailedD2HWriteBackKeepsDirtyDeviceCopy) {
  {
    auto lease = store_->Acquire(id_, Tier::kDevice, Access::kOverwrite);
    ASSERT_TRUE(lease.ok());
    ::strata::testing::FillPattern(lease->data(), kSize, 2);
  }
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kD2H, .kind = FaultKind::kTornCopy});
  EXPECT_EQ(store_->Evict(id_, Tier::kHost).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(StateOn(Tier::kDevice), State::kDirty);
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kD2H, .kind = FaultKind::kTornCopy});
  EXPECT_FALSE(store_->Evict(id_, Tier::kNvme).ok());  // through bounce chunks
  EXPECT_EQ(StateOn(Tier::kDevice), State::kDirty);
  ExpectIntact(2);
}

// A prefetch whose eviction hits a full disk (ENOSPC writing a dirty victim
// back) failed: it is counted, though its code is ResourceExhausted like a
// full tier's, and the victim's dirty host copy stays.
TEST_F(StoreFaultTest, PrefetchOnAFullDiskIsCountedFailed) {
  const TensorId b = Make(2 * kMiB, 20);  // host 4 MiB: dirty w + b
  ASSERT_TRUE(store_->Evict(b, Tier::kNvme).ok());
  const TensorId a = Make(3 * kMiB, 21);  // dirty: b needs a write-back
  io_->set_spec(
      {.rate = 1.0, .ops = FaultOps::kWrites, .kind = FaultKind::kEnospc});
  ASSERT_TRUE(store_->Prefetch(b, Tier::kHost).ok());
  EXPECT_EQ(AwaitFailedPrefetches(1), 1u);
  EXPECT_GE(io_->injected(), 1u);
  EXPECT_EQ(StateOf(b, Tier::kHost), State::kAbsent);
  // A write-back started beside the failed one (WriteBackMore) may still be
  // failing: once it has, the victim's dirty copy is there, as before.
  EXPECT_TRUE(::strata::testing::WaitUntil(
      [&] { return StateOf(a, Tier::kHost) != State::kEvicting; }));
  EXPECT_EQ(StateOf(a, Tier::kHost), State::kDirty);
  // The same fault on demand: the caller sees the full disk.
  auto lease = store_->Acquire(b, Tier::kHost, Access::kRead);
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(lease.status().message(), HasSubstr("is on a full disk"));
  EXPECT_THAT(lease.status().message(), Not(HasSubstr("tier full")));
  ExpectIntact(1);
  std::vector<std::byte> out(3 * kMiB);
  ASSERT_TRUE(store_->Read(a, out.data(), out.size()).ok());
  EXPECT_TRUE(MatchesPattern(out.data(), out.size(), 21));
  EXPECT_EQ(store_->GetStats().prefetch.failed, 1u);
}

TEST_F(StoreFaultTest, PrefetchReadErrorIsCountedFailed) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  io_->set_spec(
      {.rate = 1.0, .ops = FaultOps::kReads, .kind = FaultKind::kEio});
  ASSERT_TRUE(store_->Prefetch(id_, Tier::kDevice).ok());
  EXPECT_EQ(AwaitFailedPrefetches(1), 1u);
  EXPECT_EQ(StateOn(Tier::kDevice), State::kAbsent);
  EXPECT_EQ(StateOn(Tier::kNvme), State::kClean);
  ExpectIntact(1);
}

// A prefetch the tier has no room for (everything there leased) is skipped,
// not failed. The prefetches run one at a time in order (each is larger than
// the automatic prefetch window, one 64 KiB block), so once the failing one
// after it is counted, the skipped one has run.
TEST_F(StoreFaultTest, PrefetchWithNoRoomIsSkippedNotFailed) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  const TensorId b = Make(2 * kMiB, 30);
  ASSERT_TRUE(store_->Evict(b, Tier::kNvme).ok());
  const TensorId a = Make(3 * kMiB, 31);
  auto held = store_->Acquire(a, Tier::kHost, Access::kRead);  // 3 of 4 MiB
  ASSERT_TRUE(held.ok()) << held.status();
  io_->set_spec(
      {.rate = 1.0, .ops = FaultOps::kReads, .kind = FaultKind::kEio});
  ASSERT_TRUE(store_->Prefetch(b, Tier::kHost).ok());    // no room: skipped
  ASSERT_TRUE(store_->Prefetch(id_, Tier::kHost).ok());  // fits; EIO: failed
  EXPECT_EQ(AwaitFailedPrefetches(1), 1u);
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.prefetch.issued, 2u);
  EXPECT_EQ(stats.prefetch.failed, 1u);
  EXPECT_EQ(StateOf(b, Tier::kHost), State::kAbsent);
  EXPECT_EQ(StateOn(Tier::kHost), State::kAbsent);
  ASSERT_TRUE(held->Release().ok());
  ExpectIntact(1);
}

TEST_F(StoreFaultTest, FailedWriteLeavesPreviousContents) {
  // Whole and partial writes through the device (as for a tensor too large
  // for host memory) that fail midway must not tear the tensor.
  {
    auto lease = store_->Acquire(id_, Tier::kDevice, Access::kRead);
    ASSERT_TRUE(lease.ok());
  }
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  auto in = Pattern(kSize, 3);
  io_->set_spec({.nth = 1, .ops = FaultOps::kReads, .kind = FaultKind::kEio});
  EXPECT_FALSE(
      store_->Write(id_, in.data(), 100, 50).ok());  // partial: load fails
  ExpectIntact(1);
}

// With the default retries (4 attempts): transient faults below the store
// are survived and counted, lasting ones still fail with the copy intact.
class StoreRetryTest : public StoreFaultTest {
 protected:
  uint32_t IoAttempts() const override { return 4; }
  // NVMe requests in one read of the tensor (64 KiB blocks).
  static constexpr uint64_t kRequests = (kSize + 64 * 1024 - 1) / (64 * 1024);
};

TEST_F(StoreRetryTest, TransientReadAndWriteErrorsAreSurvived) {
  for (FaultKind kind :
       {FaultKind::kEio, FaultKind::kShortRead, FaultKind::kShortWrite}) {
    io_->set_spec({.nth = 1, .kind = kind});
    // A write reaching NVMe, then a read back from it.
    ASSERT_TRUE(store_->Write(id_, Pattern(kSize, 1).data(), kSize).ok());
    ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
    auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(MatchesPattern(lease->data(), kSize, 1));
  }
  EXPECT_EQ(io_->injected(), 3u);
  // Each failed transfer ran its requests again, one by one.
  EXPECT_EQ(store_->GetStats().io_retries, 3 * kRequests);
  EXPECT_EQ(store_->GetStats().checksum_failures, 0u);
}

TEST_F(StoreRetryTest, FlippedBitIsReadAgainOnce) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  for (Tier tier : {Tier::kHost, Tier::kDevice}) {
    io_->set_spec(
        {.nth = 1, .ops = FaultOps::kReads, .kind = FaultKind::kBitFlip});
    auto lease = store_->Acquire(id_, tier, Access::kRead);
    ASSERT_TRUE(lease.ok()) << lease.status();
    std::vector<std::byte> out(kSize);
    ASSERT_TRUE(lease->Release().ok());
    ASSERT_TRUE(store_->Read(id_, out.data(), kSize).ok());
    EXPECT_TRUE(MatchesPattern(out.data(), kSize, 1));
    ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  }
  const Stats stats = store_->GetStats();
  EXPECT_EQ(stats.checksum_rereads, 2u);
  EXPECT_EQ(stats.checksum_failures, 0u);
}

TEST_F(StoreRetryTest, LastingFaultsStillFailWithTheCopyIntact) {
  ASSERT_TRUE(store_->Evict(id_, Tier::kNvme).ok());
  io_->set_spec({.from = 1, .ops = FaultOps::kReads});
  auto lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
  EXPECT_TRUE(absl::IsUnavailable(lease.status())) << lease.status();
  EXPECT_THAT(lease.status().message(), HasSubstr("after 4 attempts"));
  EXPECT_EQ(store_->GetStats().io_retries, 3u);  // the first request, 3 more
  io_->set_spec(
      {.rate = 1.0, .ops = FaultOps::kReads, .kind = FaultKind::kBitFlip});
  lease = store_->Acquire(id_, Tier::kHost, Access::kRead);
  EXPECT_TRUE(absl::IsDataLoss(lease.status())) << lease.status();
  EXPECT_EQ(store_->GetStats().checksum_rereads, 1u);
  EXPECT_EQ(store_->GetStats().checksum_failures, 1u);
  EXPECT_EQ(StateOn(Tier::kHost), State::kAbsent);
  ExpectIntact(1);
}

}  // namespace
}  // namespace strata
