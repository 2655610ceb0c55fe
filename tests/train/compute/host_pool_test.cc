// host_pool_test.cc: HostPool covers every index once, in contiguous aligned
// pieces; small jobs stay on the caller; the cuts depend on the sizes only;
// the caller takes over pieces a worker has not started; concurrent and
// nested callers neither deadlock nor race (run it under the tsan preset);
// HostThreads' override.
#include "train/compute/cpu/host_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "base/sync.h"
#include "gtest/gtest.h"

namespace strata::train {
namespace {

struct Range {
  int64_t begin, end;
  std::thread::id thread;
};

// The ranges ParallelFor handed out, sorted by begin.
std::vector<Range> RangesOf(HostPool& pool, int64_t n, int64_t min_elements,
                            int64_t align) {
  Mutex mu;
  std::vector<Range> ranges;
  pool.ParallelFor(n, min_elements, align, [&](int64_t begin, int64_t end) {
    MutexLock lock(&mu);
    ranges.push_back({begin, end, std::this_thread::get_id()});
  });
  MutexLock lock(&mu);
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  return ranges;
}

TEST(HostPoolTest, CoversEveryIndexOnceInAlignedContiguousPieces) {
  HostPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{64}, int64_t{100},
                    int64_t{1000}, int64_t{4097}, int64_t{1} << 20}) {
    for (int64_t align : {1, 16}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " align=" << align);
      const std::vector<Range> pieces = RangesOf(pool, n, 10, align);
      ASSERT_FALSE(pieces.empty());
      EXPECT_LE(pieces.size(), size_t{4 * HostPool::kChunksPerRange});
      EXPECT_EQ(pieces.front().begin, 0);
      EXPECT_EQ(pieces.back().end, n);
      std::set<std::thread::id> threads;
      for (size_t i = 0; i < pieces.size(); ++i) {
        EXPECT_LT(pieces[i].begin, pieces[i].end);
        if (i > 0) {
          EXPECT_EQ(pieces[i].begin, pieces[i - 1].end);
        }
        EXPECT_EQ(pieces[i].begin % align, 0);
        threads.insert(pieces[i].thread);
      }
      EXPECT_LE(threads.size(), 4u);
    }
  }
}

TEST(HostPoolTest, UsesAsManyThreadsAsTheMinimumAllows) {
  HostPool pool(4);
  // One piece per chunk: ranges x min(kChunksPerRange, n / ranges).
  constexpr size_t kC = HostPool::kChunksPerRange;
  EXPECT_EQ(RangesOf(pool, 19, 10, 1).size(), 1u);  // < 2 * min_elements
  EXPECT_EQ(RangesOf(pool, 20, 10, 1).size(), 2 * kC);
  EXPECT_EQ(RangesOf(pool, 35, 10, 1).size(), 3 * kC);
  EXPECT_EQ(RangesOf(pool, 1000, 10, 1).size(), 4 * kC);  // capped by threads
  EXPECT_EQ(RangesOf(pool, 6, 3, 1).size(), 6u);  // 2 ranges of 3 elements
}

// A worker stuck in its first piece until the caller has run every other
// piece: the caller must take over the worker's unstarted pieces rather
// than wait for them (a worker the OS has not scheduled holds nothing up).
TEST(HostPoolTest, TheCallerTakesOverPiecesAWorkerHasNotStarted) {
  HostPool pool(2);
  constexpr int kPieces = 2 * HostPool::kChunksPerRange;
  std::mutex mu;
  std::condition_variable cv;
  int caller_pieces = 0, worker_pieces = 0;
  bool worker_timed_out = false;
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(1 << 16, 1 << 10, 16, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    if (std::this_thread::get_id() == caller) {
      ++caller_pieces;
      cv.notify_all();
      return;
    }
    if (!cv.wait_for(lock, std::chrono::seconds(20),
                     [&] { return caller_pieces >= kPieces - 1; })) {
      worker_timed_out = true;
    }
    ++worker_pieces;
  });
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_FALSE(worker_timed_out) << "the caller waited for the worker's pieces";
  EXPECT_EQ(caller_pieces + worker_pieces, kPieces);
  EXPECT_GE(caller_pieces, kPieces - 1);
}

TEST(HostPoolTest, SmallJobsRunOnTheCallerWithoutThePool) {
  HostPool pool(4);
  const std::vector<Range> ranges = RangesOf(pool, 100, 1000, 16);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].begin, 0);
  EXPECT_EQ(ranges[0].end, 100);
  EXPECT_EQ(ranges[0].thread, std::this_thread::get_id());
  EXPECT_EQ(pool.split_jobs(), 0);
  RangesOf(pool, 0, 1, 1);  // nothing to do: fn is not called
  EXPECT_EQ(pool.split_jobs(), 0);
}

TEST(HostPoolTest, TheCutsDependOnlyOnTheSizes) {
  HostPool pool(3);
  const auto bounds = [&] {
    std::vector<std::pair<int64_t, int64_t>> b;
    for (const Range& r : RangesOf(pool, 123457, 100, 16)) {
      b.emplace_back(r.begin, r.end);
    }
    return b;
  };
  const auto first = bounds();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(bounds(), first);
}

TEST(HostPoolTest, OneThreadRunsEverythingOnTheCaller) {
  HostPool pool(0);  // counts as 1
  EXPECT_EQ(pool.threads(), 1);
  const std::vector<Range> ranges = RangesOf(pool, 1 << 20, 1, 1);
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].thread, std::this_thread::get_id());
}

TEST(HostPoolTest, NestedCallsRunInlineInsteadOfDeadlocking) {
  HostPool pool(3);
  std::vector<int> hits(3000, 0);
  pool.ParallelFor(3, 1, 1, [&](int64_t begin, int64_t end) {
    for (int64_t outer = begin; outer < end; ++outer) {
      pool.ParallelFor(1000, 10, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[outer * 1000 + i];
      });
    }
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 3000);
}

TEST(HostPoolTest, ConcurrentCallersEachGetTheirWholeJobDone) {
  HostPool pool(3);
  constexpr int kCallers = 4;
  constexpr int kJobs = 200;
  constexpr int64_t kN = 4096;
  std::vector<std::vector<int>> data(kCallers, std::vector<int>(kN, 0));
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int j = 0; j < kJobs; ++j) {
        pool.ParallelFor(kN, 64, 16, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) ++data[c][i];
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    EXPECT_EQ(std::count(data[c].begin(), data[c].end(), kJobs), kN)
        << "caller " << c;
  }
  EXPECT_GT(pool.split_jobs(), 0);
}

TEST(HostPoolTest, ManyJobsBackToBack) {
  // Workers must not miss a job that is posted while they finish the last.
  HostPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int j = 0; j < 2000; ++j) {
    pool.ParallelFor(64, 16, 1, [&](int64_t begin, int64_t end) {
      sum.fetch_add(end - begin, std::memory_order_relaxed);
    });
  }
  EXPECT_EQ(sum.load(), 2000 * 64);
  EXPECT_EQ(pool.split_jobs(), 2000);
}

TEST(HostPoolTest, PoolsComeAndGo) {
  for (int i = 0; i < 20; ++i) {
    HostPool pool(1 + i % 5);
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(100, 1, 1, [&](int64_t begin, int64_t end) {
      sum.fetch_add(end - begin, std::memory_order_relaxed);
    });
    EXPECT_EQ(sum.load(), 100);
  }
}

TEST(HostPoolTest, SharedPoolIsSizedToTheCores) {
  EXPECT_GE(HostThreads(), 1);
  HostPool& shared = HostPool::Shared();
  EXPECT_EQ(&shared, &HostPool::Shared());
  EXPECT_GE(shared.threads(), 1);
}

TEST(HostPoolTest, HostThreadsHonoursTheEnvironment) {
  const char* old = std::getenv("STRATA_HOST_THREADS");
  const std::string saved = old == nullptr ? "" : old;
  ASSERT_EQ(setenv("STRATA_HOST_THREADS", "7", 1), 0);
  EXPECT_EQ(HostThreads(), 7);
  ASSERT_EQ(setenv("STRATA_HOST_THREADS", "0", 1), 0);  // ignored
  EXPECT_GE(HostThreads(), 1);
  if (old == nullptr) {
    unsetenv("STRATA_HOST_THREADS");
  } else {
    setenv("STRATA_HOST_THREADS", saved.c_str(), 1);
  }
}

}  // namespace
}  // namespace strata::train
