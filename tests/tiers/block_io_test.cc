// block_io_test.cc: the BlockIo engines (io_uring with and without fixed
// buffers and the pread/pwrite thread pool on O_DIRECT files, and the
// in-memory engine tests use instead of a disk): round trips, concurrent
// callers, end of file, bad descriptors, queue depth 1. io_uring cases skip,
// saying why, where the ring cannot be set up.
#include "tiers/nvme/block_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/nvme/memory_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::TempDir;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kFileBytes = 4 * kKiB * kKiB;
constexpr uint64_t kArenaBytes = 8 * kKiB * kKiB;

enum class Engine { kUringFixed, kUringPlain, kThreadPool, kMemory };

std::string EngineName(const ::testing::TestParamInfo<Engine>& info) {
  switch (info.param) {
    case Engine::kUringFixed:
      return "UringFixed";
    case Engine::kUringPlain:
      return "UringPlain";
    case Engine::kMemory:
      return "Memory";
    default:
      return "ThreadPool";
  }
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class BlockIoTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    arena_.reset(static_cast<char*>(
        std::aligned_alloc(kDirectIoAlignment, kArenaBytes)));
    ASSERT_NE(arena_, nullptr);
    std::memset(arena_.get(), 0, kArenaBytes);
    for (int i = 0; i < 2; ++i) {
      const int fd =
          open(dir_.path().c_str(), O_TMPFILE | O_RDWR | O_DIRECT, 0600);
      ASSERT_GE(fd, 0) << "O_TMPFILE|O_DIRECT in " << dir_.path() << ": "
                       << std::strerror(errno);
      fds_.push_back(fd);
      ASSERT_EQ(fallocate(fd, 0, 0, kFileBytes), 0) << std::strerror(errno);
    }
    OpenEngine(fds_, 32, &io_);
  }

  void TearDown() override {
    io_.reset();
    for (const int fd : fds_) close(fd);
  }

  // Sets `*out` to the engine under test over `fds`, or to null after
  // GTEST_SKIP (io_uring unavailable) or a failure.
  void OpenEngine(const std::vector<int>& fds, uint32_t depth,
                  std::unique_ptr<BlockIo>* out) {
    out->reset();
    absl::StatusOr<std::unique_ptr<BlockIo>> io;
    if (GetParam() == Engine::kMemory) {
      // One in-memory file per descriptor, as long as the real ones.
      io = std::unique_ptr<BlockIo>(
          new MemoryBlockIo(static_cast<int>(fds.size()), kFileBytes));
    } else if (GetParam() == Engine::kThreadPool) {
      io = OpenThreadPoolBlockIo(fds, depth);
    } else {
      std::vector<iovec> buffers;
      if (GetParam() == Engine::kUringFixed) {
        buffers.push_back(iovec{arena_.get(), kArenaBytes});
      }
      io = OpenUringBlockIo(fds, depth, buffers);
      if (!io.ok() && absl::IsUnavailable(io.status())) {
        GTEST_SKIP() << "io_uring unavailable here: " << io.status();
      }
    }
    ASSERT_TRUE(io.ok()) << io.status();
    *out = std::move(*io);
  }

  // Arena memory at `offset`, for request buffers.
  char* At(uint64_t offset) { return arena_.get() + offset; }

  TempDir dir_;
  std::unique_ptr<char, FreeDeleter> arena_;
  std::vector<int> fds_;
  std::unique_ptr<BlockIo> io_;
};

TEST_P(BlockIoTest, RoundTripAcrossTwoFiles) {
  if (io_ == nullptr) return;
  constexpr uint64_t kRequest = 32 * kKiB;
  constexpr int kCount = 64;
  std::vector<IoRequest> writes, reads;
  for (int i = 0; i < kCount; ++i) {
    const uint64_t offset = (i / 2) * 3 * kRequest;  // gaps between pieces
    char* wbuf = At(i * kRequest);
    char* rbuf = At(kArenaBytes / 2 + i * kRequest);
    FillPattern(wbuf, kRequest, i);
    writes.push_back(IoRequest{IoOp::kWrite, i % 2, offset, wbuf, kRequest});
    reads.push_back(IoRequest{IoOp::kRead, i % 2, offset, rbuf, kRequest});
  }
  ASSERT_TRUE(io_->Run(writes).ok());
  ASSERT_TRUE(io_->Run(reads).ok());
  for (int i = 0; i < kCount; ++i) {
    EXPECT_TRUE(MatchesPattern(reads[i].buf, kRequest, i)) << "request " << i;
  }
}

TEST_P(BlockIoTest, BuffersOutsideRegisteredOnesWork) {
  if (io_ == nullptr) return;
  std::unique_ptr<char, FreeDeleter> own(
      static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, 64 * kKiB)));
  FillPattern(own.get(), 64 * kKiB, 7);
  const IoRequest write{IoOp::kWrite, 1, 128 * kKiB, own.get(), 64 * kKiB};
  ASSERT_TRUE(io_->Run({&write, 1}).ok());
  std::memset(own.get(), 0, 64 * kKiB);
  const IoRequest read{IoOp::kRead, 1, 128 * kKiB, own.get(), 64 * kKiB};
  ASSERT_TRUE(io_->Run({&read, 1}).ok());
  EXPECT_TRUE(MatchesPattern(own.get(), 64 * kKiB, 7));
}

TEST_P(BlockIoTest, ManyThreadsShareTheQueue) {
  std::unique_ptr<BlockIo> io;
  OpenEngine(fds_, 4, &io);
  if (io == nullptr) return;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 8;
  constexpr uint64_t kRequest = 16 * kKiB;
  constexpr uint64_t kSlice = kPerThread * kRequest * 2;  // write + read
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        std::vector<IoRequest> writes, reads;
        for (int i = 0; i < kPerThread; ++i) {
          char* wbuf = At(t * kSlice + i * kRequest);
          char* rbuf = At(t * kSlice + (kPerThread + i) * kRequest);
          const uint64_t offset = (t * kPerThread + i) * kRequest;
          FillPattern(wbuf, kRequest, t * 1000 + round * 10 + i);
          writes.push_back(
              IoRequest{IoOp::kWrite, t % 2, offset, wbuf, kRequest});
          reads.push_back(
              IoRequest{IoOp::kRead, t % 2, offset, rbuf, kRequest});
        }
        if (!io->Run(writes).ok() || !io->Run(reads).ok()) ++failures[t];
        for (int i = 0; i < kPerThread; ++i) {
          if (!MatchesPattern(reads[i].buf, kRequest,
                              t * 1000 + round * 10 + i)) {
            ++failures[t];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// The first read returns the 8 KiB before end of file (a short read), the
// resubmitted remainder returns 0: OutOfRange, with the bytes before EOF read.
TEST_P(BlockIoTest, ReadPastEndOfFileIsOutOfRange) {
  if (io_ == nullptr) return;
  constexpr uint64_t kTail = 8 * kKiB;
  FillPattern(At(0), kTail, 3);
  const IoRequest write{IoOp::kWrite, 0, kFileBytes - kTail, At(0), kTail};
  ASSERT_TRUE(io_->Run({&write, 1}).ok());
  const IoRequest read{IoOp::kRead, 0, kFileBytes - kTail, At(64 * kKiB),
                       2 * kTail};
  const absl::Status status = io_->Run({&read, 1});
  EXPECT_TRUE(absl::IsOutOfRange(status)) << status;
  EXPECT_NE(status.message().find("file 0"), std::string::npos) << status;
  EXPECT_NE(status.message().find(std::to_string(kFileBytes - kTail)),
            std::string::npos)
      << status;
  EXPECT_TRUE(MatchesPattern(At(64 * kKiB), kTail, 3));
}

TEST_P(BlockIoTest, OneFailureStillWaitsForTheRest) {
  if (io_ == nullptr) return;
  std::vector<IoRequest> reads;
  for (int i = 0; i < 16; ++i) {
    reads.push_back(IoRequest{IoOp::kRead, i % 2, i * 64 * kKiB,
                              At(i * 64 * kKiB), 64 * kKiB});
  }
  reads[5].offset = kFileBytes;  // at end of file
  EXPECT_TRUE(absl::IsOutOfRange(io_->Run(reads)));
  // Nothing is left in flight: the engine still serves a clean batch.
  reads[5].offset = 0;
  EXPECT_TRUE(io_->Run(reads).ok());
}

TEST_P(BlockIoTest, BadDescriptorIsAnErrorNotACrash) {
  if (GetParam() == Engine::kMemory) {
    GTEST_SKIP() << "the memory engine has no descriptors";
  }
  // A closed descriptor number high enough that the ring's own fd (the
  // lowest free number) cannot take it.
  int fd = 1000;
  while (fcntl(fd, F_GETFD) != -1) ++fd;
  std::unique_ptr<BlockIo> io;
  OpenEngine({fd}, 4, &io);
  if (io == nullptr) return;
  const IoRequest read{IoOp::kRead, 0, 0, At(0), 4 * kKiB};
  const absl::Status status = io->Run({&read, 1});
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;  // EBADF
}

TEST_P(BlockIoTest, FileIndexOutOfRangeIsInvalidArgument) {
  if (io_ == nullptr) return;
  const IoRequest read{IoOp::kRead, 2, 0, At(0), 4 * kKiB};
  EXPECT_TRUE(absl::IsInvalidArgument(io_->Run({&read, 1})));
}

TEST_P(BlockIoTest, EmptyBatchIsOk) {
  if (io_ == nullptr) return;
  EXPECT_TRUE(io_->Run({}).ok());
}

TEST_P(BlockIoTest, QueueDepthOneRunsAHundredRequests) {
  std::unique_ptr<BlockIo> io;
  OpenEngine(fds_, 1, &io);
  if (io == nullptr) return;
  constexpr uint64_t kRequest = 4 * kKiB;
  std::vector<IoRequest> writes, reads;
  for (int i = 0; i < 100; ++i) {
    FillPattern(At(i * kRequest), kRequest, 100 + i);
    writes.push_back(IoRequest{IoOp::kWrite, i % 2, (i / 2) * kRequest,
                               At(i * kRequest), kRequest});
    reads.push_back(IoRequest{IoOp::kRead, i % 2, (i / 2) * kRequest,
                              At(kArenaBytes / 2 + i * kRequest), kRequest});
  }
  ASSERT_TRUE(io->Run(writes).ok());
  ASSERT_TRUE(io->Run(reads).ok());
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(MatchesPattern(reads[i].buf, kRequest, 100 + i)) << i;
  }
}

TEST_P(BlockIoTest, EngineName) {
  if (io_ == nullptr) return;
  const char* want = GetParam() == Engine::kThreadPool ? "thread-pool"
                     : GetParam() == Engine::kMemory   ? "memory"
                                                       : "io_uring";
  EXPECT_EQ(io_->engine_name(), want);
}

// What only the memory engine does: files grow on a write past the end, as
// pwrite makes them; Contents shows what reached the "disk".
TEST(MemoryBlockIoTest, WritePastEndGrowsTheFileAndContentsShowIt) {
  MemoryBlockIo io(1, 8 * kKiB);
  std::vector<char> buf(4 * kKiB);
  FillPattern(buf.data(), buf.size(), 9);
  const IoRequest write{IoOp::kWrite, 0, 12 * kKiB, buf.data(), buf.size()};
  ASSERT_TRUE(io.Run({&write, 1}).ok());
  const std::vector<std::byte> file = io.Contents(0);
  ASSERT_EQ(file.size(), 16 * kKiB);
  EXPECT_EQ(file[8 * kKiB], std::byte{0});  // the gap reads as zeros
  EXPECT_TRUE(MatchesPattern(file.data() + 12 * kKiB, 4 * kKiB, 9));
  EXPECT_TRUE(io.Contents(1).empty());
}

INSTANTIATE_TEST_SUITE_P(Engines, BlockIoTest,
                         ::testing::Values(Engine::kUringFixed,
                                           Engine::kUringPlain,
                                           Engine::kThreadPool,
                                           Engine::kMemory),
                         EngineName);

}  // namespace
}  // namespace strata
