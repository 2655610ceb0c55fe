// stream_ordered_collectives_test.cc: the thread transport under NCCL's
// ordering rules (MakeStreamOrderedCollectives): what runs, what deadlocks
// and what is met by the wrong receive, each named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <latch>
#include <thread>
#include <vector>

#include "train/comm/collectives.h"

namespace strata::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs body(rank) on one thread per rank.
template <typename F>
void OnRanks(int ranks, const F& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(r); });
  for (std::thread& t : threads) t.join();
}

TEST(StreamOrderedCollectivesTest, AnAllGatherThenAChainInRankOrderDelivers) {
  auto c = MakeStreamOrderedCollectives(3, 10.0);
  std::vector<std::vector<int32_t>> got(3, std::vector<int32_t>(6, -1));
  std::vector<int32_t> sums(3, -1);
  OnRanks(3, [&](int r) {
    std::vector<int32_t> mine(r + 1, 10 * r);  // 1, 2, 3 values
    const std::vector<uint64_t> offsets = {0, 4, 12, 24};
    auto g = c[r]->StartAllGather(mine.data(), got[r].data(), offsets, "g");
    ASSERT_TRUE(g.ok()) << g.status();
    // A chain: rank r receives r - 1's sum, adds r + 1 and passes it on.
    int32_t sum = 0;
    if (r > 0) {
      auto v = c[r]->StartRecv(r - 1, 7, &sum, 4, "the sum");
      ASSERT_TRUE(v.ok());
      ASSERT_TRUE(c[r]->Wait(*v).ok());
    }
    sum += r + 1;
    sums[r] = sum;
    if (r < 2) {
      auto s = c[r]->StartSend(r + 1, 7, &sum, 4, "the sum");
      ASSERT_TRUE(s.ok());
      EXPECT_TRUE(c[r]->Wait(*s).ok());
    }
    EXPECT_TRUE(c[r]->Wait(*g).ok());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(got[r], ElementsAre(0, 10, 10, 20, 20, 20)) << r;
  }
  EXPECT_THAT(sums, ElementsAre(1, 3, 6));
  EXPECT_EQ(c[0]->bytes_sent(), 4u * 2 + 4);
  EXPECT_EQ(c[2]->bytes_sent(), 12u * 2);
}

// Every rank sends before it receives: MPI's buffered sends carry it
// (ThreadCollectivesTest.AllGatherSendAndReceive), NCCL's stream would wait
// forever. The timeout says what each rank waits on.
TEST(StreamOrderedCollectivesTest, ARingOfSendsDeadlocksAndTheTimeoutSaysWhy) {
  auto c = MakeStreamOrderedCollectives(3, 0.2);
  std::vector<absl::Status> waited(3);
  std::latch started(3);  // every rank's operations, before any waits
  OnRanks(3, [&](int r) {
    const int32_t value = r;
    int32_t in = -1;
    auto s = c[r]->StartSend((r + 1) % 3, 0, &value, 4, "the ring's send");
    auto v = c[r]->StartRecv((r + 2) % 3, 0, &in, 4, "the ring's receive");
    started.arrive_and_wait();
    ASSERT_TRUE(s.ok() && v.ok());
    waited[r] = c[r]->Wait(*s);
  });
  for (const absl::Status& s : waited) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_THAT(s.message(),
                HasSubstr("rank 0: the ring's send (send to rank 1, tag 0, 4 "
                          "bytes); rank 1: the ring's send (send to rank 2"));
  }
}

// Two messages between a pair started in different orders: tags tell
// them apart under MPI; under NCCL the first send meets the first receive.
TEST(StreamOrderedCollectivesTest, MessagesStartedOutOfOrderAreDataLoss) {
  auto c = MakeStreamOrderedCollectives(2, 5.0);
  const int32_t a = 1, b = 2;
  int32_t got_b = 0, got_a = 0;
  std::vector<absl::Status> waited(2);
  OnRanks(2, [&](int r) {
    if (r == 0) {
      auto first = c[0]->StartSend(1, 1, &a, 4, "a");
      auto second = c[0]->StartSend(1, 2, &b, 4, "b");
      ASSERT_TRUE(first.ok() && second.ok());
      waited[0] = c[0]->Wait(*first);
      return;
    }
    auto first = c[1]->StartRecv(0, 2, &got_b, 4, "b");
    auto second = c[1]->StartRecv(0, 1, &got_a, 4, "a");
    ASSERT_TRUE(first.ok() && second.ok());
    waited[1] = c[1]->Wait(*first);
  });
  for (const absl::Status& s : waited) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(),
                HasSubstr("rank 0's next message to rank 1 is a (send to rank "
                          "1, tag 1, 4 bytes) but rank 1's next receive from "
                          "rank 0 is b (receive from rank 0, tag 2"));
  }
  EXPECT_EQ(got_b, 0);  // nothing delivered to the wrong receive
}

TEST(StreamOrderedCollectivesTest, AContributionOfTheWrongSizeIsDataLoss) {
  auto c = MakeStreamOrderedCollectives(2, 5.0);
  std::vector<absl::Status> waited(2);
  OnRanks(2, [&](int r) {
    const int64_t mine = r;
    int64_t all[2] = {};
    // Rank 1 thinks shards are 4 bytes; rank 0 contributes 8.
    const std::vector<uint64_t> offsets = r == 0
                                              ? std::vector<uint64_t>{0, 8, 16}
                                              : std::vector<uint64_t>{0, 4, 8};
    auto g = c[r]->StartAllGather(&mine, all, offsets, "the all-gather of x");
    ASSERT_TRUE(g.ok());
    waited[r] = c[r]->Wait(*g);
  });
  EXPECT_EQ(waited[1].code(), absl::StatusCode::kDataLoss) << waited[1];
  EXPECT_THAT(waited[1].message(), HasSubstr("rank 0 contributed 8 bytes"));
}

}  // namespace
}  // namespace strata::train
