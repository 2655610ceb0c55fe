// simulated_device_test.cc: SimulatedDevice — round trips, the link model
// (on the real clock and, exactly, on a fake one), round-robin chunk service
// in its copy engine, concurrent copies and the one-time reservation.
#include "tiers/device/simulated_device.h"

#include <cstring>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/device/sim_copy_engine.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

std::unique_ptr<SimulatedDevice> MakeDevice(const DeviceOptions& options) {
  auto device = SimulatedDevice::Create(options);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? std::move(*device) : nullptr;
}

DeviceOptions Options(uint64_t budget_bytes, uint64_t chunk_bytes) {
  DeviceOptions options;
  options.budget_bytes = budget_bytes;
  options.copy_chunk_bytes = chunk_bytes;
  return options;
}

class SimulatedRoundTripTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SimulatedRoundTripTest, H2DThenD2HReturnsTheBytes) {
  const uint64_t n = GetParam();
  auto device = MakeDevice(Options(4 * kMiB, 64 * 1024));
  auto arena = device->ReserveArena(4 * kMiB);
  ASSERT_TRUE(arena.ok()) << arena.status();
  std::vector<std::byte> src(n), back(n);
  FillPattern(src.data(), n, n);
  std::byte* dev = *arena + 3;  // odd device offset too
  ASSERT_TRUE(device->Copy(CopyKind::kH2D, dev, src.data(), n).ok());
  ASSERT_TRUE(device->Copy(CopyKind::kD2H, back.data(), dev, n).ok());
  EXPECT_TRUE(MatchesPattern(back.data(), n, n));
}

INSTANTIATE_TEST_SUITE_P(OddSizes, SimulatedRoundTripTest,
                         ::testing::Values(1, 511, 4097, kMiB + 3));

TEST(SimulatedDeviceTest, ArenaIsAlignedAndReservedOnce) {
  auto device = MakeDevice(Options(kMiB, kMiB));
  auto arena = device->ReserveArena(kMiB);
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*arena) % 256, 0u);
  EXPECT_EQ(device->ReserveArena(kMiB).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SimulatedDeviceTest, ArenaAboveBudgetIsResourceExhausted) {
  auto device = MakeDevice(Options(kMiB, kMiB));
  EXPECT_EQ(device->ReserveArena(kMiB + 1).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(SimulatedDeviceTest, MemInfoCountsTheReservation) {
  DeviceOptions options = Options(8 * kMiB, kMiB);
  options.sim_memory_bytes = 8 * kMiB;  // the GPU memory it reports
  auto device = MakeDevice(options);
  ASSERT_TRUE(device->ReserveArena(3 * kMiB).ok());
  auto info = device->GetMemInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total_bytes, 8 * kMiB);
  EXPECT_EQ(info->free_bytes, 5 * kMiB);
  EXPECT_EQ(device->name(), "simulated");
  EXPECT_TRUE(device->is_simulated());
}

TEST(SimulatedDeviceTest, CopyOutsideTheArenaIsInvalidArgument) {
  auto device = MakeDevice(Options(kMiB, kMiB));
  auto arena = device->ReserveArena(kMiB);
  ASSERT_TRUE(arena.ok());
  std::vector<std::byte> host(16);
  EXPECT_EQ(device->Copy(CopyKind::kH2D, host.data(), host.data(), 16).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      device->Copy(CopyKind::kD2H, host.data(), *arena + kMiB - 8, 16).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(SimulatedDeviceTest, EventsAndRegistrationAreNoOps) {
  auto device = MakeDevice(Options(kMiB, kMiB));
  auto event = device->RecordEvent(nullptr);
  ASSERT_TRUE(event.ok());
  EXPECT_TRUE((*event)->Synchronize().ok());
  EXPECT_TRUE(device->StreamWait(nullptr, **event).ok());
  std::vector<std::byte> host(4096);
  EXPECT_TRUE(device->RegisterHost(host.data(), host.size()).ok());
  EXPECT_TRUE(device->UnregisterHost(host.data(), host.size()).ok());
}

TEST(SimulatedDeviceTest, LinkModelMakesCopiesTakeTime) {
  DeviceOptions options = Options(64 * kMiB, 4 * kMiB);
  options.sim_link_gbps = 1.0;
  auto device = MakeDevice(options);
  auto arena = device->ReserveArena(64 * kMiB);
  ASSERT_TRUE(arena.ok());
  std::vector<std::byte> src(64 * kMiB);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(
      device->Copy(CopyKind::kH2D, *arena, src.data(), src.size()).ok());
  // 64 MiB at 1 GB/s is 0.067 s; only the lower bound is asserted.
  EXPECT_GE(absl::ToDoubleSeconds(absl::Now() - start), 0.06);
}

TEST(SimulatedDeviceTest, LatencyIsPaidOncePerCopy) {
  DeviceOptions options = Options(kMiB, 4096);
  options.sim_link_gbps = 100.0;
  options.sim_latency_seconds = 0.05;
  auto device = MakeDevice(options);
  auto arena = device->ReserveArena(kMiB);
  ASSERT_TRUE(arena.ok());
  std::vector<std::byte> src(kMiB);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(
      device->Copy(CopyKind::kH2D, *arena, src.data(), src.size()).ok());
  EXPECT_GE(absl::ToDoubleSeconds(absl::Now() - start), 0.05);
}

// On a clock that moves only as far as the link model asks, a copy takes
// exactly its modelled time: 64 MiB at 1 GB/s in 4 MiB chunks, plus the
// latency once.
TEST(SimulatedDeviceTest, LinkModelTimeIsExactOnAFakeClock) {
  DeviceOptions options = Options(64 * kMiB, 4 * kMiB);
  options.sim_link_gbps = 1.0;
  options.sim_latency_seconds = 0.05;
  FakeClock clock(/*auto_advance=*/true);
  auto device = SimulatedDevice::Create(options, &clock);
  ASSERT_TRUE(device.ok()) << device.status();
  auto arena = (*device)->ReserveArena(64 * kMiB);
  ASSERT_TRUE(arena.ok());
  std::vector<std::byte> src(64 * kMiB);
  FillPattern(src.data(), 4096, 5);
  const absl::Time start = clock.Now();
  ASSERT_TRUE(
      (*device)->Copy(CopyKind::kH2D, *arena, src.data(), src.size()).ok());
  EXPECT_EQ(clock.Now() - start,
            absl::Nanoseconds(67108864) + absl::Milliseconds(50));
  EXPECT_TRUE(MatchesPattern(*arena, 4096, 5));
}

// A 4 KiB copy queued while the first 1 MiB chunk of a 16 MiB copy holds the
// link (0.5 GB/s: 2.097152 ms a chunk) waits for exactly that chunk, then
// overtakes the other fifteen. The fake clock parks the engine at the end of
// each chunk, so the test decides when each chunk ends and queues the small
// copy while the first one is provably in service.
TEST(SimCopyEngineTest, SmallCopyOvertakesALargeOne) {
  constexpr uint64_t kBig = 16 * kMiB, kSmall = 4096;
  FakeClock clock;
  SimCopyEngine engine(kMiB, 0.5, 0, &clock);
  std::vector<std::byte> big_src(kBig), big_dst(kBig), small_dst(kSmall);
  std::vector<std::byte> small_src = ::strata::testing::Pattern(kSmall, 7);
  FillPattern(big_src.data(), kBig, 8);
  const absl::Time t0 = clock.Now();
  std::thread big([&] {
    EXPECT_TRUE(engine.Copy(big_dst.data(), big_src.data(), kBig).ok());
  });
  clock.WaitForSleepers(1);  // chunk 1 of the big copy is on the link
  EXPECT_EQ(engine.queued(), 0);
  std::thread small([&] {
    EXPECT_TRUE(engine.Copy(small_dst.data(), small_src.data(), kSmall).ok());
  });
  while (engine.queued() < 1) std::this_thread::yield();  // queued behind it
  ASSERT_TRUE(clock.AdvanceToNextDeadline());             // chunk 1 ends
  clock.WaitForSleepers(1);  // the small copy is served
  ASSERT_TRUE(clock.AdvanceToNextDeadline());
  small.join();
  const absl::Time small_done = clock.Now();
  EXPECT_TRUE(MatchesPattern(small_dst.data(), kSmall, 7));
  for (int chunk = 2; chunk <= 16; ++chunk) {
    clock.WaitForSleepers(1);
    ASSERT_TRUE(clock.AdvanceToNextDeadline()) << "chunk " << chunk;
  }
  big.join();
  const absl::Duration chunk_time = absl::Nanoseconds(2097152);
  const absl::Duration small_time = absl::Nanoseconds(8192);
  EXPECT_EQ(small_done - t0, chunk_time + small_time);
  EXPECT_EQ(clock.Now() - t0, 16 * chunk_time + small_time);
  EXPECT_TRUE(MatchesPattern(big_dst.data(), kBig, 8));
  EXPECT_EQ(engine.queued(), 0);
}

TEST(SimulatedDeviceTest, ConcurrentCopiesFromEightThreadsAreCorrect) {
  constexpr int kThreads = 8;
  constexpr uint64_t kSlot = 2 * kMiB;
  auto device = MakeDevice(Options(kThreads * kSlot, 64 * 1024));
  auto arena = device->ReserveArena(kThreads * kSlot);
  ASSERT_TRUE(arena.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        const uint64_t n = kSlot - 977 * (t + round);
        const uint64_t seed = 100 * t + round;
        std::vector<std::byte> src(n), back(n);
        FillPattern(src.data(), n, seed);
        std::byte* dev = *arena + t * kSlot;
        EXPECT_TRUE(device->Copy(CopyKind::kH2D, dev, src.data(), n).ok());
        EXPECT_TRUE(device->Copy(CopyKind::kD2H, back.data(), dev, n).ok());
        EXPECT_TRUE(MatchesPattern(back.data(), n, seed));
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

TEST(SimulatedDeviceTest, BadOptionsAreInvalidArgument) {
  DeviceOptions options;
  options.copy_chunk_bytes = 0;
  EXPECT_EQ(SimulatedDevice::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = DeviceOptions();
  options.sim_link_gbps = -1;
  EXPECT_EQ(SimulatedDevice::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace strata
