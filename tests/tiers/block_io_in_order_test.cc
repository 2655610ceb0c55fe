// block_io_in_order_test.cc: BlockIo::RunInOrder on every engine (io_uring,
// the thread pool, the in-memory engine) and through RetryingBlockIo: each
// request is handed over once, in order, with its bytes there; a failed
// request and every later one are not handed over; an error of the caller's
// ends the handing and is returned; and io_uring hands a request over while a
// later one is still in flight (forced with a pipe that only the caller's
// hand-over fills, so waiting for the whole batch first would never end).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/nvme/block_io.h"
#include "tiers/nvme/memory_block_io.h"
#include "tiers/nvme/retrying_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::TempDir;

constexpr uint64_t kRequest = 16 * 1024;
constexpr int kCount = 24;
constexpr uint64_t kFileBytes = kCount * kRequest;

enum class Engine { kUring, kThreadPool, kMemory };

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class BlockIoInOrderTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    buf_.reset(static_cast<char*>(
        std::aligned_alloc(kDirectIoAlignment, 2 * kFileBytes)));
    fd_ = open(dir_.path().c_str(), O_TMPFILE | O_RDWR | O_DIRECT, 0600);
    ASSERT_GE(fd_, 0) << std::strerror(errno);
    ASSERT_EQ(fallocate(fd_, 0, 0, kFileBytes), 0) << std::strerror(errno);
    absl::StatusOr<std::unique_ptr<BlockIo>> io;
    switch (GetParam()) {
      case Engine::kUring:
        io = OpenUringBlockIo({fd_}, 8, {});
        if (absl::IsUnavailable(io.status())) {
          GTEST_SKIP() << "io_uring unavailable here: " << io.status();
        }
        break;
      case Engine::kThreadPool:
        io = OpenThreadPoolBlockIo({fd_}, 8);
        break;
      case Engine::kMemory:
        io = std::unique_ptr<BlockIo>(new MemoryBlockIo(1, kFileBytes));
        break;
    }
    ASSERT_TRUE(io.ok()) << io.status();
    io_ = std::move(*io);
    std::vector<IoRequest> writes;
    for (int i = 0; i < kCount; ++i) {
      FillPattern(Written(i), kRequest, 40 + i);
      writes.push_back({IoOp::kWrite, 0, i * kRequest, Written(i), kRequest});
    }
    ASSERT_TRUE(io_->Run(writes).ok());
  }
  void TearDown() override {
    io_.reset();
    if (fd_ >= 0) close(fd_);
  }

  char* Written(int i) { return buf_.get() + i * kRequest; }
  char* Back(int i) { return buf_.get() + kFileBytes + i * kRequest; }
  // Reads of every request back into the second half, request 7 of 0 bytes.
  std::vector<IoRequest> Reads() {
    std::vector<IoRequest> reads;
    for (int i = 0; i < kCount; ++i) {
      reads.push_back(
          {IoOp::kRead, 0, i * kRequest, Back(i), i == 7 ? 0 : kRequest});
    }
    std::memset(Back(0), 0, kFileBytes);
    return reads;
  }

  TempDir dir_;
  std::unique_ptr<char, FreeDeleter> buf_;
  int fd_ = -1;
  std::unique_ptr<BlockIo> io_;
};

TEST_P(BlockIoInOrderTest, HandsEveryRequestOverOnceInOrderWithItsBytes) {
  const std::vector<IoRequest> reads = Reads();
  std::vector<size_t> handed;
  int incomplete = 0;
  const absl::Status status = io_->RunInOrder(reads, [&](size_t i) {
    handed.push_back(i);
    if (i != 7 && !MatchesPattern(Back(i), kRequest, 40 + i)) ++incomplete;
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(handed.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(handed[i], i);
  EXPECT_EQ(incomplete, 0);
}

TEST_P(BlockIoInOrderTest, TheCallersErrorEndsTheHandingAndIsReturned) {
  size_t calls = 0;
  const absl::Status status = io_->RunInOrder(Reads(), [&](size_t i) {
    ++calls;
    return i == 3 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_EQ(calls, 4u);
  // Nothing is left in flight: the engine serves the next batch whole.
  calls = 0;
  EXPECT_TRUE(io_->RunInOrder(Reads(),
                              [&](size_t) {
                                ++calls;
                                return absl::OkStatus();
                              })
                  .ok());
  EXPECT_EQ(calls, static_cast<size_t>(kCount));
}

TEST_P(BlockIoInOrderTest, AFailedRequestAndTheRestAreNotHandedOver) {
  std::vector<IoRequest> reads = Reads();
  reads[5].offset = kFileBytes;  // at end of file
  std::vector<size_t> handed;
  const absl::Status status = io_->RunInOrder(reads, [&](size_t i) {
    handed.push_back(i);
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsOutOfRange(status)) << status;
  // io_uring hands over 0..4 as they arrive; the other engines (the default
  // RunInOrder) hand over nothing of a batch that failed.
  const size_t want = GetParam() == Engine::kUring ? 5 : 0;
  ASSERT_EQ(handed.size(), want);
  for (size_t i = 0; i < want; ++i) EXPECT_EQ(handed[i], i);
}

TEST(UringInOrderTest, HandsARequestOverWhileALaterOneIsInFlight) {
  TempDir dir;
  const int file = open(dir.path().c_str(), O_TMPFILE | O_RDWR, 0600);
  ASSERT_GE(file, 0) << std::strerror(errno);
  ASSERT_EQ(ftruncate(file, 4096), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  auto io = OpenUringBlockIo({file, pipe_fds[0]}, 4, {});
  if (absl::IsUnavailable(io.status())) {
    GTEST_SKIP() << "io_uring unavailable here: " << io.status();
  }
  ASSERT_TRUE(io.ok()) << io.status();
  std::vector<char> first(4096), second(4096);
  std::vector<char> message(4096, 'x');
  const IoRequest reads[2] = {{IoOp::kRead, 0, 0, first.data(), 4096},
                              {IoOp::kRead, 1, 0, second.data(), 4096}};
  // Request 1 reads the pipe, which only the hand-over of request 0 fills.
  auto fill_pipe = [&] {
    return write(pipe_fds[1], message.data(), message.size()) == 4096;
  };
  bool filled_by_hand_over = false;
  std::future<absl::Status> run = std::async(std::launch::async, [&] {
    return (*io)->RunInOrder(reads, [&](size_t i) {
      if (i == 0) filled_by_hand_over = fill_pipe();
      return absl::OkStatus();
    });
  });
  if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "request 0 was not handed over before request 1 ended";
    ASSERT_TRUE(fill_pipe());  // let the run end
  }
  const absl::Status status = run.get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(filled_by_hand_over);
  EXPECT_EQ(second, message);
  io->reset();
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(file);
}

// Through the retries: a transient fault makes the requests not yet handed
// over run again, and each is still handed over once, in order.
TEST(RetryingInOrderTest, RetriedRequestsAreHandedOverOnceInOrder) {
  auto faulty = std::make_unique<FaultyBlockIo>(
      std::make_unique<MemoryBlockIo>(1, kFileBytes), FaultSpec{});
  FaultyBlockIo* fault = faulty.get();
  RetryingBlockIo io(std::move(faulty),
                     RetryPolicy{.attempts = 3, .backoff_seconds = 0});
  std::vector<char> data(kFileBytes), back(kFileBytes);
  FillPattern(data.data(), kFileBytes, 9);
  std::vector<IoRequest> writes, reads;
  for (int i = 0; i < kCount; ++i) {
    writes.push_back(
        {IoOp::kWrite, 0, i * kRequest, data.data() + i * kRequest, kRequest});
    reads.push_back(
        {IoOp::kRead, 0, i * kRequest, back.data() + i * kRequest, kRequest});
  }
  ASSERT_TRUE(io.Run(writes).ok());
  fault->set_spec({.nth = 6, .ops = FaultOps::kReads, .kind = FaultKind::kEio});
  std::vector<size_t> handed;
  const absl::Status status = io.RunInOrder(reads, [&](size_t i) {
    handed.push_back(i);
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(fault->injected(), 1u);
  EXPECT_GT(io.retries(), 0u);
  ASSERT_EQ(handed.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_EQ(handed[i], i);
  EXPECT_EQ(back, data);
}

// The caller's own error is never retried, even one that reads as transient.
TEST(RetryingInOrderTest, TheCallersErrorIsNotRetried) {
  RetryingBlockIo io(std::make_unique<MemoryBlockIo>(1, kFileBytes),
                     RetryPolicy{.attempts = 3, .backoff_seconds = 0});
  std::vector<char> back(2 * kRequest);
  const IoRequest reads[2] = {
      {IoOp::kRead, 0, 0, back.data(), kRequest},
      {IoOp::kRead, 0, kRequest, back.data() + kRequest, kRequest}};
  size_t calls = 0;
  const absl::Status status = io.RunInOrder(reads, [&](size_t) {
    ++calls;
    return absl::UnavailableError("the caller's");
  });
  EXPECT_EQ(status.message(), "the caller's");
  EXPECT_EQ(calls, 1u);
  EXPECT_EQ(io.retries(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Engines, BlockIoInOrderTest,
                         ::testing::Values(Engine::kUring, Engine::kThreadPool,
                                           Engine::kMemory),
                         [](const ::testing::TestParamInfo<Engine>& info) {
                           switch (info.param) {
                             case Engine::kUring:
                               return "Uring";
                             case Engine::kThreadPool:
                               return "ThreadPool";
                             default:
                               return "Memory";
                           }
                         });

}  // namespace
}  // namespace strata
