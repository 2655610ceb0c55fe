// uring_stress_test.cc: stress of the io_uring engine's caller-reaped
// completions (leader/follower, no reaper thread) and of RunInOrder: many
// callers on one shallow ring, large batches with failures, the engine
// destroyed right after the last Run, callbacks that run more I/O on the same
// ring, and retries under concurrency.
//
// Every test asserts outcomes that hold for any interleaving (bytes, hand-over
// order, status codes), so it is deterministic in what it checks; a hang is
// caught by a watchdog that fails the test instead of stalling the run.
// Nothing sleeps.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"
#include "tiers/nvme/block_io.h"
#include "tiers/nvme/retrying_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::TempDir;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuf = std::unique_ptr<char, FreeDeleter>;

AlignedBuf Aligned(uint64_t bytes) {
  return AlignedBuf(
      static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, bytes)));
}

// Runs `body` and fails (aborting the process: its threads may be stuck in
// the engine) if it has not returned within `seconds`.
void WithWatchdog(int seconds, const char* what,
                  const std::function<void()>& body,
                  const std::function<void()>& on_hang = {}) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread watchdog([&finished, &on_hang, seconds, what] {
    if (finished.wait_for(std::chrono::seconds(seconds)) !=
        std::future_status::ready) {
      std::fprintf(stderr, "HANG: %s did not finish within %d s\n", what,
                   seconds);
      if (on_hang) on_hang();
      std::fflush(stderr);
      std::abort();
    }
  });
  body();
  done.set_value();
  watchdog.join();
}

constexpr uint64_t kBlock = 8 * 1024;

// Runs caller(0 .. threads-1) on threads of their own under WithWatchdog.
void RunCallers(int seconds, const char* what, int threads,
                const std::function<void(int)>& caller) {
  WithWatchdog(seconds, what, [&] {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) running.emplace_back(caller, t);
    for (std::thread& th : running) th.join();
  });
}

// Fills `blocks` blocks of `src` with patterns seed0 + b and returns the
// writes that put block b at block b of file 0.
std::vector<IoRequest> PatternWrites(char* src, int blocks, uint64_t seed0) {
  std::vector<IoRequest> writes;
  for (int b = 0; b < blocks; ++b) {
    FillPattern(src + b * kBlock, kBlock, seed0 + b);
    writes.push_back({IoOp::kWrite, 0, b * kBlock, src + b * kBlock, kBlock});
  }
  return writes;
}

// One O_DIRECT temporary file of `blocks` blocks.
class UringFile {
 public:
  explicit UringFile(uint64_t blocks) : bytes_(blocks * kBlock) {
    fd_ = open(dir_.path().c_str(), O_TMPFILE | O_RDWR | O_DIRECT, 0600);
    EXPECT_GE(fd_, 0) << std::strerror(errno);
    EXPECT_EQ(fallocate(fd_, 0, 0, bytes_), 0) << std::strerror(errno);
  }
  ~UringFile() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  uint64_t bytes() const { return bytes_; }

 private:
  TempDir dir_;
  uint64_t bytes_;
  int fd_ = -1;
};

// Opens io_uring over `fd` (nullptr and a skip message when unavailable).
std::unique_ptr<BlockIo> OpenUring(int fd, uint32_t depth,
                                   const std::vector<iovec>& buffers,
                                   std::string* skip) {
  absl::StatusOr<std::unique_ptr<BlockIo>> io =
      OpenUringBlockIo({fd}, depth, buffers);
  if (absl::IsUnavailable(io.status())) {
    *skip = io.status().ToString();
    return nullptr;
  }
  EXPECT_TRUE(io.ok()) << io.status();
  return io.ok() ? std::move(*io) : nullptr;
}

struct Shape {
  uint32_t depth;
  bool registered;  // buffers registered (READ_FIXED/WRITE_FIXED)
};

class UringStressTest : public ::testing::TestWithParam<Shape> {};

// ManyCallersRunAndRunInOrderOnOneRing's requests per caller batch (blocks
// per region).
constexpr int kPerCaller = 6;

// Where one caller of ManyCallersRunAndRunInOrderOnOneRing works: its blocks
// of the write buffer and of the read-back buffer, and its region's offset.
struct CallerRegion {
  char* out;
  char* back;
  uint64_t base;
};

// Writes the caller's region, block j with pattern seed * 16 + j, as one batch
// whose request `empty` is 0 bytes.
absl::Status WriteRegion(BlockIo& io, const CallerRegion& region, uint64_t seed,
                         int empty) {
  std::vector<IoRequest> writes;
  for (int j = 0; j < kPerCaller; ++j) {
    FillPattern(region.out + j * kBlock, kBlock, seed * 16 + j);
    writes.push_back({IoOp::kWrite, 0, region.base + j * kBlock,
                      region.out + j * kBlock, j == empty ? 0 : kBlock});
  }
  return io.Run(writes);
}

// The reads of the region back, in the iteration's form: 0 all good; 1 with a
// read at end of file appended, and a good one after it; 2 with the caller
// refusing at `*refuse_at` (reads.size() when it refuses none).
std::vector<IoRequest> RegionReads(const CallerRegion& region,
                                   uint64_t file_bytes, int t, int it,
                                   int empty, size_t* refuse_at) {
  std::vector<IoRequest> reads;
  for (int j = 0; j < kPerCaller; ++j) {
    reads.push_back({IoOp::kRead, 0, region.base + j * kBlock,
                     region.back + j * kBlock, j == empty ? 0 : kBlock});
  }
  const int form = it % 3;
  *refuse_at = reads.size();
  if (form == 1) {  // a read at end of file: fails, nothing after it
    reads.push_back({IoOp::kRead, 0, file_bytes,
                     region.back + (t % kPerCaller) * kBlock, kBlock});
    // A good read after it must not be handed over either.
    reads.push_back({IoOp::kRead, 0, region.base, region.back, kBlock});
  } else if (form == 2) {
    *refuse_at = (t + it) % kPerCaller;
  }
  return reads;
}

// What RunInOrder did: its status, the indices it handed over in that order,
// and how many of the region's blocks came with wrong bytes.
struct HandOver {
  absl::Status status;
  std::vector<size_t> handed;
  int wrong = 0;
};

// Reads the region back with RunInOrder; the callbacks are slow (they check
// the bytes of the whole region) so they overlap the other callers' I/O.
HandOver ReadInOrder(BlockIo& io, const std::vector<IoRequest>& reads,
                     const CallerRegion& region, uint64_t seed, int empty,
                     size_t refuse_at) {
  HandOver h;
  char* back = region.back;
  h.status = io.RunInOrder(reads, [&](size_t i) -> absl::Status {
    h.handed.push_back(i);
    if (i < static_cast<size_t>(kPerCaller) && static_cast<int>(i) != empty &&
        !MatchesPattern(back + i * kBlock, kBlock, seed * 16 + i)) {
      ++h.wrong;
    }
    // Slow: look at every block of the region again.
    for (int j = 0; j < kPerCaller; ++j) {
      (void)MatchesPattern(back + j * kBlock, kBlock, seed * 16 + j);
    }
    if (i == refuse_at) return absl::CancelledError("refused");
    return absl::OkStatus();
  });
  return h;
}

// Expects the status the form gives (OK, OutOfRange, Cancelled); returns how
// many requests must have been handed over.
size_t ExpectFormStatus(const absl::Status& r, int form, size_t refuse_at,
                        int t, int it) {
  size_t want_handed = kPerCaller;
  if (form == 0) {
    if (!r.ok()) ADD_FAILURE() << "t=" << t << " it=" << it << ": " << r;
  } else if (form == 1) {
    if (!absl::IsOutOfRange(r)) {
      ADD_FAILURE() << "t=" << t << " it=" << it << ": want OutOfRange, " << r;
    }
  } else {
    want_handed = refuse_at + 1;
    if (!absl::IsCancelled(r)) {
      ADD_FAILURE() << "t=" << t << " it=" << it << ": want Cancelled, " << r;
    }
  }
  return want_handed;
}

// One iteration of caller `t`: writes its region with a fresh pattern, reads
// it back in the iteration's form, and checks what was handed over (every
// wanted request once, in order, with its bytes). False when the write failed
// (the caller stops).
bool RunCallerIteration(BlockIo& io, const CallerRegion& region,
                        uint64_t file_bytes, int t, int it,
                        std::atomic<int>& bad) {
  const uint64_t seed = 1000 * t + it + 1;
  const int empty = (t + it) % kPerCaller;  // the 0-byte request
  absl::Status w = WriteRegion(io, region, seed, empty);
  if (!w.ok()) {
    ++bad;
    ADD_FAILURE() << "write t=" << t << " it=" << it << ": " << w;
    return false;
  }
  std::memset(region.back, 0, kPerCaller * kBlock);
  size_t refuse_at = 0;
  const std::vector<IoRequest> reads =
      RegionReads(region, file_bytes, t, it, empty, &refuse_at);
  const int form = it % 3;
  const HandOver h = ReadInOrder(io, reads, region, seed, empty, refuse_at);
  const size_t want_handed = ExpectFormStatus(h.status, form, refuse_at, t, it);
  bool order_ok = h.handed.size() == want_handed;
  for (size_t k = 0; order_ok && k < h.handed.size(); ++k) {
    order_ok = h.handed[k] == k;
  }
  if (!order_ok || h.wrong != 0) {
    ++bad;
    ADD_FAILURE() << "t=" << t << " it=" << it << " form=" << form
                  << ": handed " << h.handed.size() << " (want " << want_handed
                  << "), " << h.wrong << " with wrong bytes";
  }
  return true;
}

// Many callers share one ring of depth 1, 2 or 4. Each owns a region of the
// file: it writes its region with a fresh pattern (one 0-byte request in the
// batch), then reads it back with RunInOrder, in one of three forms by
// iteration: all good (every request handed over once, in order, with its
// bytes); with a read at end of file appended (OutOfRange, the good ones
// before it handed over, nothing at or after it); or with the caller refusing
// at some index (that error back, exactly that many calls). Slow callbacks
// (they check the bytes of the whole region) overlap the others' I/O.
TEST_P(UringStressTest, ManyCallersRunAndRunInOrderOnOneRing) {
  const Shape shape = GetParam();
  constexpr int kThreads = 16;
  constexpr int kIters = 12;
  UringFile file(kThreads * kPerCaller);
  AlignedBuf buf = Aligned(2 * file.bytes());
  std::vector<iovec> regs;
  if (shape.registered) regs.push_back({buf.get(), 2 * file.bytes()});
  std::string skip;
  std::unique_ptr<BlockIo> io = OpenUring(file.fd(), shape.depth, regs, &skip);
  if (io == nullptr && !skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(io, nullptr);

  std::atomic<int> bad{0};
  const auto caller = [&](int t) {
    const CallerRegion region{
        .out = buf.get() + t * kPerCaller * kBlock,
        .back = buf.get() + file.bytes() + t * kPerCaller * kBlock,
        .base = t * kPerCaller * kBlock};
    for (int it = 0; it < kIters; ++it) {
      if (!RunCallerIteration(*io, region, file.bytes(), t, it, bad)) return;
    }
  };
  RunCallers(60, "ManyCallersRunAndRunInOrderOnOneRing", kThreads, caller);
  EXPECT_EQ(bad.load(), 0);
}

// Batches far larger than the queue depth, from several callers at once,
// some of whose requests fail (read past end of file) and some of which are
// 0 bytes: every batch returns, a good batch reads the right bytes, a bad
// one fails with OutOfRange, and the ring serves a good batch afterwards.
TEST_P(UringStressTest, LargeBatchesWithFailuresShareAShallowRing) {
  const Shape shape = GetParam();
  constexpr int kBlocks = 64;
  constexpr int kThreads = 8;
  constexpr int kBatch = 150;
  UringFile file(kBlocks);
  AlignedBuf src = Aligned(file.bytes());
  AlignedBuf dst = Aligned(kThreads * kBatch * kBlock);
  std::vector<iovec> regs;
  if (shape.registered) {
    regs.push_back({src.get(), file.bytes()});
    regs.push_back({dst.get(), kThreads * kBatch * kBlock});
  }
  std::string skip;
  std::unique_ptr<BlockIo> io = OpenUring(file.fd(), shape.depth, regs, &skip);
  if (io == nullptr && !skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(io, nullptr);
  ASSERT_TRUE(io->Run(PatternWrites(src.get(), kBlocks, 7000)).ok());

  std::atomic<int> bad{0};
  const auto caller = [&](int t) {
    char* mine = dst.get() + t * kBatch * kBlock;
    for (int round = 0; round < 4; ++round) {
      const bool fail = (t + round) % 2 == 1;
      std::vector<IoRequest> reads;
      for (int i = 0; i < kBatch; ++i) {
        const int b = (i * 7 + t + round) % kBlocks;
        uint64_t offset = b * kBlock;
        if (fail && i % 37 == 11) offset = file.bytes() + i * kBlock;  // EOF
        reads.push_back({IoOp::kRead, 0, offset, mine + i * kBlock,
                         i % 13 == 5 ? 0 : kBlock});
      }
      std::memset(mine, 0, kBatch * kBlock);
      const absl::Status s = io->Run(reads);
      if (fail) {
        if (!absl::IsOutOfRange(s)) {
          ++bad;
          ADD_FAILURE() << "t=" << t << " round=" << round
                        << ": want OutOfRange, " << s;
        }
        continue;
      }
      if (!s.ok()) {
        ++bad;
        ADD_FAILURE() << "t=" << t << " round=" << round << ": " << s;
        continue;
      }
      for (int i = 0; i < kBatch; ++i) {
        if (i % 13 == 5) continue;
        const int b = (i * 7 + t + round) % kBlocks;
        if (!MatchesPattern(mine + i * kBlock, kBlock, 7000 + b)) {
          ++bad;
          ADD_FAILURE() << "t=" << t << " round=" << round << " request " << i
                        << " (block " << b << ") has wrong bytes";
          break;
        }
      }
    }
  };
  RunCallers(60, "LargeBatchesWithFailuresShareAShallowRing", kThreads, caller);
  EXPECT_EQ(bad.load(), 0);
}

// The engine is destroyed as soon as the last of several concurrent Runs
// returns, many times over: no Run may return while the kernel or another
// caller (the reaper) still uses its requests or the ring.
TEST_P(UringStressTest, DestroyedRightAfterTheLastRunReturns) {
  const Shape shape = GetParam();
  constexpr int kThreads = 6;
  constexpr int kBlocks = 24;
  UringFile file(kBlocks);
  AlignedBuf src = Aligned(file.bytes());
  AlignedBuf dst = Aligned(kThreads * kBlocks * kBlock);
  const std::vector<IoRequest> fill = PatternWrites(src.get(), kBlocks, 300);
  std::vector<iovec> regs;
  if (shape.registered)
    regs.push_back({dst.get(), kThreads * kBlocks * kBlock});
  std::atomic<int> bad{0};
  WithWatchdog(60, "DestroyedRightAfterTheLastRunReturns", [&] {
    for (int round = 0; round < 25; ++round) {
      std::string skip;
      std::unique_ptr<BlockIo> io =
          OpenUring(file.fd(), shape.depth, regs, &skip);
      if (io == nullptr) {
        if (skip.empty()) ++bad;
        return;
      }
      if (round == 0 && !io->Run(fill).ok()) ++bad;
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          char* mine = dst.get() + t * kBlocks * kBlock;
          std::memset(mine, 0, kBlocks * kBlock);
          std::vector<IoRequest> reads;
          for (int b = 0; b < kBlocks; ++b) {
            reads.push_back(
                {IoOp::kRead, 0, b * kBlock, mine + b * kBlock, kBlock});
          }
          const absl::Status s =
              t % 2 == 0
                  ? io->Run(reads)
                  : io->RunInOrder(reads, [&](size_t i) {
                      return MatchesPattern(mine + i * kBlock, kBlock, 300 + i)
                                 ? absl::OkStatus()
                                 : absl::DataLossError("wrong bytes");
                    });
          if (!s.ok()) {
            ++bad;
            ADD_FAILURE() << "round " << round << " t=" << t << ": " << s;
          }
          for (int b = 0; b < kBlocks; ++b) {
            if (!MatchesPattern(mine + b * kBlock, kBlock, 300 + b)) {
              ++bad;
              ADD_FAILURE() << "round " << round << " t=" << t << " block " << b
                            << " has wrong bytes";
              break;
            }
          }
        });
      }
      for (std::thread& th : threads) th.join();
      io.reset();  // right after the last Run returned
    }
  });
  EXPECT_EQ(bad.load(), 0);
}

// A RunInOrder callback that itself runs I/O on the same ring, directly and
// from a second thread it waits for, while the caller's later requests hold
// every slot (depth 1 and 2): the nested caller reaps the outer requests'
// completions to get a slot, so nothing waits forever; every byte is right
// and every request is handed over once, in order.
TEST_P(UringStressTest, CallbacksRunMoreIoOnTheSameRing) {
  const Shape shape = GetParam();
  constexpr int kBlocks = 16;
  UringFile file(kBlocks);
  AlignedBuf src = Aligned(file.bytes());
  AlignedBuf outer = Aligned(file.bytes());
  AlignedBuf inner = Aligned(2 * kBlock);
  std::vector<iovec> regs;
  if (shape.registered) regs.push_back({outer.get(), file.bytes()});
  std::string skip;
  std::unique_ptr<BlockIo> io = OpenUring(file.fd(), shape.depth, regs, &skip);
  if (io == nullptr && !skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(io, nullptr);
  ASSERT_TRUE(io->Run(PatternWrites(src.get(), kBlocks, 900)).ok());
  WithWatchdog(30, "CallbacksRunMoreIoOnTheSameRing", [&] {
    for (int round = 0; round < 20; ++round) {
      std::vector<IoRequest> reads;
      for (int b = 0; b < kBlocks; ++b) {
        reads.push_back(
            {IoOp::kRead, 0, b * kBlock, outer.get() + b * kBlock, kBlock});
      }
      std::memset(outer.get(), 0, file.bytes());
      size_t next = 0;
      int wrong = 0;
      const absl::Status s = io->RunInOrder(reads, [&](size_t i) {
        if (i != next++) ++wrong;
        if (!MatchesPattern(outer.get() + i * kBlock, kBlock, 900 + i)) {
          ++wrong;
        }
        const int b = static_cast<int>((i * 5 + round) % kBlocks);
        const IoRequest one{IoOp::kRead, 0, b * kBlock, inner.get(), kBlock};
        absl::Status nested;
        if (i % 2 == 0) {
          nested = io->Run(absl::MakeConstSpan(&one, 1));
        } else {  // on another thread, which this callback waits for
          std::thread other(
              [&] { nested = io->Run(absl::MakeConstSpan(&one, 1)); });
          other.join();
        }
        if (!nested.ok()) return nested;
        if (!MatchesPattern(inner.get(), kBlock, 900 + b)) ++wrong;
        return absl::OkStatus();
      });
      EXPECT_TRUE(s.ok()) << "round " << round << ": " << s;
      EXPECT_EQ(next, reads.size()) << "round " << round;
      EXPECT_EQ(wrong, 0) << "round " << round;
      if (::testing::Test::HasFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Depths, UringStressTest,
                         ::testing::Values(Shape{1, false}, Shape{2, false},
                                           Shape{4, false}, Shape{2, true}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "Depth" + std::to_string(info.param.depth) +
                                  (info.param.registered ? "Fixed" : "Plain");
                         });

// RetryingBlockIo over a FaultyBlockIo (EIO on some reads) over io_uring,
// shared by several callers of RunInOrder: the transient errors are retried
// away, so every batch succeeds and hands every request over once, in order,
// with its bytes.
TEST(RetryingUringStressTest, RunInOrderRetriesKeepOrderUnderConcurrency) {
  constexpr int kBlocks = 32;
  constexpr int kThreads = 6;
  UringFile file(kBlocks);
  AlignedBuf src = Aligned(file.bytes());
  AlignedBuf dst = Aligned(kThreads * kBlocks * kBlock);
  std::string skip;
  std::unique_ptr<BlockIo> uring = OpenUring(file.fd(), 2, {}, &skip);
  if (uring == nullptr && !skip.empty()) GTEST_SKIP() << skip;
  ASSERT_NE(uring, nullptr);
  ASSERT_TRUE(uring->Run(PatternWrites(src.get(), kBlocks, 500)).ok());
  auto faulty = std::make_unique<FaultyBlockIo>(
      std::move(uring), FaultSpec{.seed = 11,
                                  .rate = 0.05,
                                  .ops = FaultOps::kReads,
                                  .kind = FaultKind::kEio});
  FaultyBlockIo* faults = faulty.get();
  RetryingBlockIo io(std::move(faulty),
                     RetryPolicy{.attempts = 50, .backoff_seconds = 0});
  std::atomic<int> bad{0};
  WithWatchdog(60, "RunInOrderRetriesKeepOrderUnderConcurrency", [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        char* mine = dst.get() + t * kBlocks * kBlock;
        for (int round = 0; round < 6; ++round) {
          std::memset(mine, 0, kBlocks * kBlock);
          std::vector<IoRequest> reads;
          for (int b = 0; b < kBlocks; ++b) {
            reads.push_back({IoOp::kRead, 0, b * kBlock, mine + b * kBlock,
                             b % 9 == 4 ? 0 : kBlock});
          }
          size_t next = 0;
          int wrong = 0;
          const absl::Status s = io.RunInOrder(reads, [&](size_t i) {
            if (i != next) ++wrong;
            next = i + 1;
            if (i % 9 != 4 &&
                !MatchesPattern(mine + i * kBlock, kBlock, 500 + i)) {
              ++wrong;
            }
            return absl::OkStatus();
          });
          if (!s.ok() || wrong != 0 || next != reads.size()) {
            ++bad;
            ADD_FAILURE() << "t=" << t << " round=" << round << ": " << s
                          << ", " << wrong << " wrong, handed up to " << next;
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
  });
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(faults->injected(), 0u);  // the retry path ran
}

}  // namespace
}  // namespace strata
