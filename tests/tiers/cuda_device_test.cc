// cuda_device_test.cc: the CUDA device backend on a real GPU — round trips,
// concurrent copies, event ordering, host registration and the free-memory
// check. Skips (never passes silently) where no GPU answers.
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "strata/options.h"
#include "tests/util/test_util.h"
#include "tiers/device/device_backend.h"
#include "tiers/device/simulated_device.h"
#include "tiers/host/host_arena.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = Open(/*chunk_bytes=*/256 * 1024);
    if (device_ == nullptr) GTEST_SKIP() << "no CUDA device: " << skip_why_;
  }

  std::unique_ptr<DeviceBackend> Open(uint64_t chunk_bytes) {
    DeviceOptions options;
    options.backend = DeviceBackendKind::kCuda;
    options.copy_chunk_bytes = chunk_bytes;
    auto device = OpenDeviceBackend(options);
    if (!device.ok()) {
      skip_why_ = std::string(device.status().message());
      return nullptr;
    }
    if ((*device)->is_simulated()) {
      skip_why_ = "STRATA_DEVICE forces the simulated device";
      return nullptr;
    }
    return std::move(*device);
  }

  std::byte* Reserve(uint64_t bytes) {
    auto arena = device_->ReserveArena(bytes);
    EXPECT_TRUE(arena.ok()) << arena.status();
    return arena.ok() ? *arena : nullptr;
  }

  std::unique_ptr<DeviceBackend> device_;
  std::string skip_why_;
};

TEST_F(CudaDeviceTest, NameAndMemInfo) {
  EXPECT_EQ(device_->name().rfind("cuda:", 0), 0u) << device_->name();
  EXPECT_FALSE(device_->is_simulated());
  auto info = device_->GetMemInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

TEST_F(CudaDeviceTest, TimeCopiesMovesTheBytesAndTimesThemWithEvents) {
  constexpr uint64_t kBytes = 8 * kMiB + 3;
  std::byte* dev = Reserve(2 * 8 * kMiB + 512);
  ASSERT_NE(dev, nullptr);
  std::vector<std::byte> src(kBytes), back(kBytes);
  FillPattern(src.data(), kBytes, 11);
  absl::StatusOr<double> h2d =
      device_->TimeCopies(CopyKind::kH2D, dev, src.data(), kBytes, 3);
  ASSERT_TRUE(h2d.ok()) << h2d.status();
  EXPECT_GT(*h2d, 0);
  std::byte* dev2 = dev + 8 * kMiB + 256;
  absl::StatusOr<double> d2d =
      device_->TimeCopies(CopyKind::kD2D, dev2, dev, kBytes, 2);
  ASSERT_TRUE(d2d.ok()) << d2d.status();
  absl::StatusOr<double> d2h =
      device_->TimeCopies(CopyKind::kD2H, back.data(), dev2, kBytes, 1);
  ASSERT_TRUE(d2h.ok()) << d2h.status();
  EXPECT_GT(*d2h, 0);
  EXPECT_TRUE(MatchesPattern(back.data(), kBytes, 11));
}

TEST_F(CudaDeviceTest, RoundTripOfOddSizes) {
  std::byte* dev = Reserve(64 * kMiB);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dev) % 256, 0u);
  for (uint64_t n :
       {uint64_t{1}, uint64_t{511}, uint64_t{4097}, kMiB + 3, 32 * kMiB + 1}) {
    std::vector<std::byte> src(n), back(n);
    FillPattern(src.data(), n, n);
    ASSERT_TRUE(device_->Copy(CopyKind::kH2D, dev + 5, src.data(), n).ok());
    ASSERT_TRUE(device_->Copy(CopyKind::kD2H, back.data(), dev + 5, n).ok());
    EXPECT_TRUE(MatchesPattern(back.data(), n, n)) << n << " bytes";
  }
}

TEST_F(CudaDeviceTest, ConcurrentCopiesFromFourThreads) {
  constexpr int kThreads = 4;
  constexpr uint64_t kSlot = 8 * kMiB;
  std::byte* arena = Reserve(kThreads * kSlot);
  ASSERT_NE(arena, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 8; ++round) {
        const uint64_t n = kSlot - 4093 * (t + 1) * (round + 1);
        const uint64_t seed = 1000 * t + round;
        std::vector<std::byte> src(n), back(n);
        FillPattern(src.data(), n, seed);
        std::byte* dev = arena + t * kSlot;
        EXPECT_TRUE(device_->Copy(CopyKind::kH2D, dev, src.data(), n).ok());
        EXPECT_TRUE(device_->Copy(CopyKind::kD2H, back.data(), dev, n).ok());
        EXPECT_TRUE(MatchesPattern(back.data(), n, seed));
      }
    });
  }
  for (auto& thread : threads) thread.join();
}

TEST_F(CudaDeviceTest, CopyAfterAnEventIsOrdered) {
  constexpr uint64_t kBytes = 16 * kMiB;
  std::byte* dev = Reserve(kBytes);
  ASSERT_NE(dev, nullptr);
  std::vector<std::byte> src(kBytes), back(kBytes);
  FillPattern(src.data(), kBytes, 42);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, dev, src.data(), kBytes).ok());
  // Legacy default stream: record, make it wait on its own event, then copy
  // back on the D2H stream after the event.
  auto event = device_->RecordEvent(nullptr);
  ASSERT_TRUE(event.ok()) << event.status();
  ASSERT_TRUE(device_->StreamWait(nullptr, **event).ok());
  ASSERT_TRUE(
      device_->Copy(CopyKind::kD2H, back.data(), dev, kBytes, event->get())
          .ok());
  EXPECT_TRUE((*event)->Synchronize().ok());
  EXPECT_TRUE(MatchesPattern(back.data(), kBytes, 42));
  // An H2D copy after an event recorded past it, then read back.
  FillPattern(src.data(), kBytes, 43);
  auto second = device_->RecordEvent(nullptr);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(
      device_->Copy(CopyKind::kH2D, dev, src.data(), kBytes, second->get())
          .ok());
  ASSERT_TRUE(device_->Copy(CopyKind::kD2H, back.data(), dev, kBytes).ok());
  EXPECT_TRUE(MatchesPattern(back.data(), kBytes, 43));
}

TEST_F(CudaDeviceTest, EventFromAnotherBackendIsInvalidArgument) {
  std::byte* dev = Reserve(kMiB);
  ASSERT_NE(dev, nullptr);
  auto simulated = SimulatedDevice::Create(DeviceOptions());
  ASSERT_TRUE(simulated.ok());
  auto foreign = (*simulated)->RecordEvent(nullptr);
  ASSERT_TRUE(foreign.ok());
  std::vector<std::byte> host(64);
  EXPECT_EQ(device_->Copy(CopyKind::kH2D, dev, host.data(), 64, foreign->get())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->StreamWait(nullptr, **foreign).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaDeviceTest, RegisterHostOnAnMmapRegion) {
  constexpr uint64_t kBytes = 64 * kMiB;
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* host = static_cast<std::byte*>(p);
  ASSERT_TRUE(device_->RegisterHost(host, kBytes).ok());
  std::byte* dev = Reserve(kBytes);
  ASSERT_NE(dev, nullptr);
  FillPattern(host, kBytes, 9);
  ASSERT_TRUE(device_->Copy(CopyKind::kH2D, dev, host, kBytes).ok());
  std::memset(host, 0, kBytes);
  ASSERT_TRUE(device_->Copy(CopyKind::kD2H, host, dev, kBytes).ok());
  EXPECT_TRUE(MatchesPattern(host, kBytes, 9));
  EXPECT_TRUE(device_->UnregisterHost(host, kBytes).ok());
  munmap(p, kBytes);
}

TEST_F(CudaDeviceTest, HostArenaRegistersWithTheGpu) {
  auto arena =
      HostArena::Create(64 * kMiB, /*lock_memory=*/false, device_.get());
  ASSERT_TRUE(arena.ok()) << arena.status();
  EXPECT_TRUE((*arena)->registered());
}

TEST_F(CudaDeviceTest, ArenaAboveFreeMemoryIsResourceExhausted) {
  auto info = device_->GetMemInfo();
  ASSERT_TRUE(info.ok());
  auto arena = device_->ReserveArena(info->free_bytes + kGiB);
  EXPECT_EQ(arena.status().code(), absl::StatusCode::kResourceExhausted)
      << arena.status();
  EXPECT_NE(arena.status().message().find("--device-budget"),
            std::string::npos);
  // The refused reservation did not use up the one allowed.
  EXPECT_NE(Reserve(kMiB), nullptr);
  EXPECT_EQ(device_->ReserveArena(kMiB).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace strata
