// break_spec_test.cc: adversarial specs and arguments
// (tests/util/break_test_util.h says what the break tests check): overflowing
// shapes, out-of-range enums and tiers, huge sizes, read/write ranges and null
// buffers — each a clear InvalidArgument (or the documented code), never a
// crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "strata/store.h"
#include "tests/util/break_test_util.h"

namespace strata {
namespace {

using ::strata::testing::BreakEnv;
using ::strata::testing::Pattern;
using ::strata::testing::RunIsolated;
using Code = absl::StatusCode;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();

// Regression: CheckSpec multiplies the shape's extents (and the dtype size) in
// uint64_t without an overflow check, so a shape whose element count wraps
// around 2^64 is accepted with a tiny size_bytes. Create should return
// InvalidArgument ("shape ... overflows") instead of OK.
TEST(BreakSpecTest, ShapeElementProductOverflowIsRefused) {
  BreakEnv env;
  const int64_t big = (int64_t{1} << 62) + 1;  // 4 * big == 4 (mod 2^64)
  auto a = env.store->Create({.name = "wrap",
                              .size_bytes = 4,
                              .dtype = DType::kUInt8,
                              .shape = {big, 4}});
  EXPECT_EQ(a.status().code(), Code::kInvalidArgument)
      << "shape {2^62+1, 4} of uint8 is not 4 bytes; got " << a.status();
  auto b = env.store->Create({.name = "wrap_dtype",
                              .size_bytes = 4,
                              .dtype = DType::kFloat32,
                              .shape = {big}});
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument)
      << "shape {2^62+1} of float32 is not 4 bytes; got " << b.status();
  auto c =
      env.store->Create({.name = "wrap3",
                         .size_bytes = 8,
                         .dtype = DType::kInt64,
                         .shape = {int64_t{1} << 32, int64_t{1} << 32, 1}});
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << c.status();
}

TEST(BreakSpecTest, HugeNegativeAndEmptySpecsAreRefused) {
  BreakEnv env;
  for (uint64_t size : {uint64_t{1} << 63, kMax64, (uint64_t{1} << 50) + 1}) {
    auto id = env.store->Create({.name = "huge", .size_bytes = size});
    EXPECT_EQ(id.status().code(), Code::kInvalidArgument) << size;
  }
  auto pib =
      env.store->Create({.name = "pib", .size_bytes = uint64_t{1} << 50});
  EXPECT_EQ(pib.status().code(), Code::kResourceExhausted) << pib.status();
  auto neg =
      env.store->Create({.name = "neg", .size_bytes = 4, .shape = {-2, -2}});
  EXPECT_EQ(neg.status().code(), Code::kInvalidArgument) << neg.status();
  auto zero_dim =
      env.store->Create({.name = "z", .size_bytes = 4, .shape = {4, 0}});
  EXPECT_EQ(zero_dim.status().code(), Code::kInvalidArgument);
  auto min = env.store->Create(
      {.name = "min", .size_bytes = 4, .shape = {INT64_MIN, 1}});
  EXPECT_EQ(min.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(env.store->GetStats().tensors, 0u);
  env.ExpectNoSpaceHeld();
}

// Regression (was crash): Create with a home outside {kDevice, kHost, kNvme}
// indexes capacity_[] and alloc_[] out of bounds (has_tier / AllocateOn).
// Observed: home=3 gives a garbage ResourceExhausted ("? tier full ... 0 B of 1
// B in use", read from memory past alloc_[2]); home=7 dies with SIGFPE (RoundUp
// divides by a garbage alignment of 0). It should return InvalidArgument
// naming the bad tier (CheckSpec should validate spec.home).
TEST(BreakSpecTest, OutOfRangeHomeTierIsInvalidArgument) {
  RunIsolated(30, [] {
    BreakEnv env;
    for (int bad : {3, 7, 255}) {
      auto id = env.store->Create({.name = "bad_home",
                                   .size_bytes = 4096,
                                   .home = static_cast<Tier>(bad)});
      EXPECT_EQ(id.status().code(), Code::kInvalidArgument)
          << "home tier " << bad << ": " << id.status();
    }
  });
}

TEST(BreakSpecTest, OutOfRangeTierArgumentsAreInvalidArgument) {
  RunIsolated(30, [] {
    BreakEnv env;
    TensorId id = env.Make(4096);
    auto in = Pattern(4096, 1);
    ASSERT_TRUE(env.store->Write(id, in.data(), 4096).ok());
    for (int bad : {3, 200, 255}) {
      const Tier t = static_cast<Tier>(bad);
      for (Access a : {Access::kRead, Access::kWrite, Access::kOverwrite}) {
        EXPECT_EQ(env.store->Acquire(id, t, a).status().code(),
                  Code::kInvalidArgument)
            << bad;
      }
      EXPECT_EQ(env.store->Prefetch(id, t).code(), Code::kInvalidArgument);
      EXPECT_EQ(env.store->Evict(id, t).code(), Code::kInvalidArgument);
    }
    EXPECT_TRUE(env.Holds(id, 4096, 1));
  });
}

// Regression: Acquire accepts an Access value outside the enum and grants it as
// a write lease (everything that is not kRead is treated as exclusive; Grant
// drops the other copies). It should be InvalidArgument.
TEST(BreakSpecTest, OutOfRangeAccessIsInvalidArgument) {
  RunIsolated(30, [] {
    BreakEnv env;
    TensorId id = env.Make(4096);
    ASSERT_TRUE(env.store->Write(id, Pattern(4096, 1).data(), 4096).ok());
    auto lease = env.store->Acquire(id, Tier::kHost, static_cast<Access>(7));
    EXPECT_EQ(lease.status().code(), Code::kInvalidArgument)
        << "Access(7) was " << (lease.ok() ? "granted" : "refused: ")
        << lease.status();
  });
}

TEST(BreakSpecTest, ReadWriteRangesAndNullBuffers) {
  BreakEnv env;
  constexpr uint64_t kSize = 1000;
  TensorId id = env.Make(kSize);
  auto in = Pattern(kSize, 5);
  ASSERT_TRUE(env.store->Write(id, in.data(), kSize).ok());
  std::vector<std::byte> buf(kSize);
  struct Range {
    uint64_t bytes, offset;
  };
  for (Range r : std::vector<Range>{{kSize + 1, 0},
                                    {1, kSize},
                                    {0, kSize + 1},
                                    {kMax64, 0},
                                    {2, kMax64},
                                    {kMax64, 2},
                                    {kMax64, kMax64},
                                    {uint64_t{1} << 63, uint64_t{1} << 63},
                                    {kSize, 1}}) {
    EXPECT_EQ(env.store->Write(id, buf.data(), r.bytes, r.offset).code(),
              Code::kInvalidArgument)
        << r.bytes << " @ " << r.offset;
    EXPECT_EQ(env.store->Read(id, buf.data(), r.bytes, r.offset).code(),
              Code::kInvalidArgument)
        << r.bytes << " @ " << r.offset;
  }
  EXPECT_EQ(env.store->Write(id, nullptr, 10, 0).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(env.store->Read(id, nullptr, 10, 0).code(), Code::kInvalidArgument);
  // Empty ranges anywhere inside [0, size] are fine, null or not.
  EXPECT_TRUE(env.store->Write(id, nullptr, 0, kSize).ok());
  EXPECT_TRUE(env.store->Read(id, nullptr, 0, 0).ok());
  EXPECT_TRUE(env.store->Read(id, buf.data(), 0, kSize).ok());
  // The last byte alone.
  std::byte last{0x5a};
  ASSERT_TRUE(env.store->Write(id, &last, 1, kSize - 1).ok());
  in[kSize - 1] = last;
  ASSERT_TRUE(env.store->Read(id, buf.data(), kSize).ok());
  EXPECT_EQ(std::memcmp(buf.data(), in.data(), kSize), 0);
  EXPECT_EQ(env.store->Read(TensorId{12345}, buf.data(), 1).code(),
            Code::kNotFound);
  EXPECT_EQ(env.store->Write(TensorId{12345}, buf.data(), 1).code(),
            Code::kNotFound);
  ASSERT_TRUE(env.store->Destroy(id).ok());
  env.ExpectNoSpaceHeld();
}

TEST(BreakSpecTest, ReadOfEmptyTensorIsFailedPreconditionEvenForZeroBytes) {
  BreakEnv env;
  TensorId id = env.Make(100);
  std::byte b;
  EXPECT_EQ(env.store->Read(id, &b, 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(env.store->Read(id, &b, 0).code(), Code::kFailedPrecondition);
  EXPECT_FALSE(env.store->GetResidency(id)->has_contents);
}

// Regression (was minor): enum arguments out of range are accepted silently. A
// dtype outside DType makes DTypeSize() return 1 and the shape check passes; a
// kind outside TensorKind is stored. Both should be InvalidArgument.
TEST(BreakSpecTest, OutOfRangeDTypeAndKindAreInvalidArgument) {
  BreakEnv env;
  auto d = env.store->Create({.name = "d",
                              .size_bytes = 4,
                              .dtype = static_cast<DType>(42),
                              .shape = {4}});
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument) << d.status();
  auto k = env.store->Create(
      {.name = "k", .size_bytes = 4, .kind = static_cast<TensorKind>(42)});
  EXPECT_EQ(k.status().code(), Code::kInvalidArgument) << k.status();
}

}  // namespace
}  // namespace strata
