// Lease::CopyOut / CopyIn: range copies between a leased copy and caller
// memory on the simulated device — byte-exact at offsets, counted on the
// links, refused on misuse, and a failed device copy leaves the caller's
// buffer and the tensor's other bytes as they were.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "src/store_open.h"
#include "strata/store.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::Pattern;
using ::testing::HasSubstr;

class LeaseCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreSeams seams;
    seams.wrap_device = [this](std::unique_ptr<DeviceBackend> d) {
      auto f = std::make_unique<FaultyDevice>(std::move(d));
      device_ = f.get();
      return f;
    };
    auto s = OpenStore(::strata::testing::SmallStoreOptions(
                           dir_.path(), 4 * kMiB, 4 * kMiB, 32 * kMiB),
                       seams);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    id_ = *store_->Create({.name = "w", .size_bytes = kSize});
    ASSERT_TRUE(store_->Write(id_, contents_.data(), kSize).ok());
  }
  uint64_t LinkBytes(Link link) const {
    return store_->GetStats().links[static_cast<int>(link)].bytes;
  }
  std::vector<std::byte> ReadAll() {
    std::vector<std::byte> out(kSize);
    EXPECT_TRUE(store_->Read(id_, out.data(), kSize).ok());
    return out;
  }

  static constexpr uint64_t kSize = 256 * 1024 + 12;
  ::strata::testing::TempDir dir_;
  FaultyDevice* device_ = nullptr;
  std::unique_ptr<Store> store_;
  TensorId id_;
  const std::vector<std::byte> contents_ = Pattern(kSize, 1);
};

TEST_F(LeaseCopyTest, DeviceRangesRoundTripAndCountOnTheLinks) {
  auto lease = store_->Acquire(id_, Tier::kDevice, Access::kWrite);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t d2h = LinkBytes(Link::kD2H), h2d = LinkBytes(Link::kH2D);
  const uint64_t offset = 4097, n = 70'001;
  std::vector<std::byte> part(n);
  ASSERT_TRUE(lease->CopyOut(offset, part.data(), n).ok());
  EXPECT_EQ(std::memcmp(part.data(), contents_.data() + offset, n), 0);
  EXPECT_EQ(LinkBytes(Link::kD2H) - d2h, n);
  const std::vector<std::byte> fresh = Pattern(n, 2);
  ASSERT_TRUE(lease->CopyIn(offset, fresh.data(), n).ok());
  EXPECT_EQ(LinkBytes(Link::kH2D) - h2d, n);
  ASSERT_TRUE(lease->Release().ok());
  // The write lease made the device copy the tensor's contents.
  std::vector<std::byte> expect = contents_;
  std::memcpy(expect.data() + offset, fresh.data(), n);
  EXPECT_EQ(ReadAll(), expect);
}

TEST_F(LeaseCopyTest, HostRangesCopyWithoutTheLinks) {
  auto lease = store_->Acquire(id_, Tier::kHost, Access::kWrite);
  ASSERT_TRUE(lease.ok()) << lease.status();
  const uint64_t moved = LinkBytes(Link::kD2H) + LinkBytes(Link::kH2D);
  std::vector<std::byte> tail(100);
  ASSERT_TRUE(lease->CopyOut(kSize - 100, tail.data(), 100).ok());
  EXPECT_EQ(std::memcmp(tail.data(), contents_.data() + kSize - 100, 100), 0);
  const std::vector<std::byte> fresh = Pattern(100, 3);
  ASSERT_TRUE(lease->CopyIn(0, fresh.data(), 100).ok());
  EXPECT_EQ(LinkBytes(Link::kD2H) + LinkBytes(Link::kH2D), moved);
  ASSERT_TRUE(lease->Release().ok());
  std::vector<std::byte> expect = contents_;
  std::memcpy(expect.data(), fresh.data(), 100);
  EXPECT_EQ(ReadAll(), expect);
}

TEST_F(LeaseCopyTest, MisuseIsRefused) {
  std::vector<std::byte> buf(16);
  auto reader = store_->Acquire(id_, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(reader.ok());
  absl::Status s = reader->CopyIn(0, buf.data(), 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("kRead"));
  s = reader->CopyOut(kSize - 8, buf.data(), 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("outside"));
  EXPECT_EQ(reader->CopyOut(0, nullptr, 16).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(reader->CopyOut(0, nullptr, 0).ok());
  ASSERT_TRUE(reader->Release().ok());
  s = reader->CopyOut(0, buf.data(), 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("released"));
  EXPECT_EQ(Lease().CopyOut(0, buf.data(), 1).code(),
            absl::StatusCode::kFailedPrecondition);
  auto held = store_->Acquire(id_, Tier::kDevice, Access::kRead);
  ASSERT_TRUE(held.ok());
  store_.reset();
  s = held->CopyOut(0, buf.data(), 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("closed"));
}

TEST_F(LeaseCopyTest, FailedDeviceCopiesAreReportedAndNotCounted) {
  auto lease = store_->Acquire(id_, Tier::kDevice, Access::kWrite);
  ASSERT_TRUE(lease.ok());
  const uint64_t d2h = LinkBytes(Link::kD2H);
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kD2H, .kind = FaultKind::kTornCopy});
  std::vector<std::byte> part(4096);
  const absl::Status failed = lease->CopyOut(0, part.data(), part.size());
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(failed.message(), HasSubstr("tensor 'w' device -> caller"));
  EXPECT_EQ(LinkBytes(Link::kD2H), d2h);
  EXPECT_EQ(store_->GetStats().links[static_cast<int>(Link::kD2H)].failures,
            1u);
  // A torn CopyIn tears only its own range of the write-leased copy; the
  // caller, who holds the new bytes, copies them in again.
  device_->set_spec(
      {.nth = 1, .ops = FaultOps::kH2D, .kind = FaultKind::kTornCopy});
  const std::vector<std::byte> fresh = Pattern(4096, 4);
  EXPECT_EQ(lease->CopyIn(8192, fresh.data(), 4096).code(),
            absl::StatusCode::kInternal);
  device_->set_spec({});
  ASSERT_TRUE(lease->CopyIn(8192, fresh.data(), 4096).ok());
  ASSERT_TRUE(lease->Release().ok());
  std::vector<std::byte> expect = contents_;
  std::memcpy(expect.data() + 8192, fresh.data(), 4096);
  EXPECT_EQ(ReadAll(), expect);
}

}  // namespace
}  // namespace strata
