// stream_ordered_threads_test.cc: adversarial tests of the stream-ordered
// device acquire (issue 14 item 6), written by a breaker pass — many threads
// acquiring, releasing and writing while FaultyDevice's kEventWait gate
// holds every queued copy's event (some copies failing late), and prefetch
// with a trained trace meeting held copies. Every wait is bounded: a test
// that would hang fails by a timeout instead.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "strata/store.h"
#include "tests/util/stream_ordered_break_test_util.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_device.h"

namespace strata {
namespace {

using ::strata::testing::MatchesPattern;
using ::strata::testing::Pattern;
using ::strata::testing::StreamOrderedBreakTest;

// Many threads acquire and release device and host leases of several
// tensors while every queued copy's event is held (and the device is too
// small for all of them, so evictions park in the events too).
TEST_F(StreamOrderedBreakTest, ManyThreadsWhileCopiesAreHeld) {
  constexpr int kTensors = 4;
  Open(2, kTensors);
  device_->gate().Arm(GateOp::kEventWait, 100000);
  std::atomic<int> bad{0}, errors{0}, done{0};
  std::vector<std::thread> threads;
  std::mutex err_mu;
  std::string first_error;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int k = (t + i) % kTensors;
        const Tier tier = (i % 3 == 2) ? Tier::kHost : Tier::kDevice;
        absl::StatusOr<Lease> l = store_->Acquire(ids_[k], tier, Access::kRead);
        if (!l.ok()) {
          // Every device slot leased by the other threads: a fair refusal.
          if (l.status().code() == absl::StatusCode::kResourceExhausted) {
            continue;
          }
          ++errors;
          std::lock_guard<std::mutex> g(err_mu);
          if (first_error.empty()) first_error = l.status().ToString();
          continue;
        }
        std::vector<std::byte> got(kSize);
        if (!l->CopyOut(0, got.data(), kSize).ok() ||
            !MatchesPattern(got.data(), kSize, 7 + k)) {
          ++bad;
        }
        if (!l->Release().ok()) ++errors;
      }
      ++done;
    });
  }
  // Let them run into the held events, then open the gate.
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5));
  device_->gate().Release(GateOp::kEventWait);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (done.load() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(done.load(), 6) << "threads hung";
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(errors.load(), 0) << first_error;
  ASSERT_TRUE(QueuedLoadsEnd());
  std::cout << "queued_loads=" << store_->GetStats().queued_loads
            << " reader_waits=" << store_->GetStats().device_reader_waits
            << "\n";
  for (int k = 0; k < kTensors; ++k) EXPECT_TRUE(ReadMatches(k, 7 + k));
}

// The same with writers too, and late faults on some copies.
TEST_F(StreamOrderedBreakTest, ManyThreadsWithWritersAndLateFaults) {
  constexpr int kTensors = 4;
  Open(2, kTensors);
  device_->set_late_copy_faults(true);
  device_->set_spec({.nth = 3, .ops = FaultOps::kH2D, .kind = FaultKind::kEio});
  device_->gate().Arm(GateOp::kEventWait, 100000);
  std::atomic<int> bad{0}, done{0}, unexpected{0};
  std::vector<std::thread> threads;
  std::mutex err_mu;
  std::string first_error;
  // Each tensor's content is always pattern 7+k: writers rewrite the same.
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int k = (t + i) % kTensors;
        absl::Status s;
        if (t == 0 && i % 2 == 0) {
          s = store_->Write(ids_[k], Pattern(kSize, 7 + k).data(), kSize);
        } else {
          const Access acc =
              (t == 1 && i % 4 == 1) ? Access::kWrite : Access::kRead;
          absl::StatusOr<Lease> l =
              store_->Acquire(ids_[k], Tier::kDevice, acc);
          s = l.status();
          if (l.ok()) {
            std::vector<std::byte> got(kSize);
            if (!l->CopyOut(0, got.data(), kSize).ok() ||
                !MatchesPattern(got.data(), kSize, 7 + k)) {
              // Only a lease whose Release then reports the fault may see
              // undefined bytes.
              s = l->Release();
              if (s.ok()) ++bad;
              continue;
            }
            s = l->Release();
          }
        }
        if (!s.ok() && s.code() != FaultyDevice::InjectedCode() &&
            s.code() != absl::StatusCode::kFailedPrecondition &&
            s.code() != absl::StatusCode::kResourceExhausted) {
          ++unexpected;
          std::lock_guard<std::mutex> g(err_mu);
          if (first_error.empty()) first_error = s.ToString();
        }
      }
      ++done;
    });
  }
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 2, absl::Seconds(5));
  device_->gate().Release(GateOp::kEventWait);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (done.load() < 6 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(done.load(), 6) << "threads hung";
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0) << "a lease saw wrong bytes and was told OK";
  EXPECT_EQ(unexpected.load(), 0) << first_error;
  ASSERT_TRUE(QueuedLoadsEnd());
  std::cout << "queued_loads=" << store_->GetStats().queued_loads
            << " injected=" << device_->injected() << "\n";
  for (int k = 0; k < kTensors; ++k) {
    absl::StatusOr<std::vector<std::byte>> got = ReadAll(k);
    if (!got.ok()) got = ReadAll(k);  // a pending late error first
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesPattern(got->data(), kSize, 7 + k)) << "t" << k;
  }
}

// Prefetch on, trace trained over a few steps; then a step with the copies'
// events held and a late fault; prefetches and acquires meet queued copies.
TEST_F(StreamOrderedBreakTest, PrefetchWithATrainedTraceAndHeldCopies) {
  constexpr int kTensors = 4;
  Open(2, kTensors, /*prefetch=*/true);
  auto step = [&](int* bad, int* errs, bool reverse = false) {
    store_->BeginStep();
    for (int j = 0; j < kTensors; ++j) {
      const int k = reverse ? kTensors - 1 - j : j;
      absl::StatusOr<Lease> l =
          store_->Acquire(ids_[k], Tier::kDevice, Access::kRead);
      if (!l.ok()) {
        ++*errs;
        continue;
      }
      std::vector<std::byte> got(kSize);
      const bool ok = l->CopyOut(0, got.data(), kSize).ok() &&
                      MatchesPattern(got.data(), kSize, 7 + k);
      const absl::Status r = l->Release();
      if (!r.ok()) ++*errs;
      if (!ok && r.ok()) ++*bad;
    }
    store_->EndStep();
  };
  int bad = 0, errs = 0;
  for (int s = 0; s < 3; ++s) step(&bad, &errs);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(errs, 0);
  LateFaultNextH2D();
  device_->gate().Arm(GateOp::kEventWait, 100000);
  auto f = std::async(std::launch::async, [&] {
    int b = 0, e = 0;
    for (int s = 0; s < 3; ++s) step(&b, &e, /*reverse=*/s % 2 == 0);
    return std::make_pair(b, e);
  });
  device_->gate().WaitUntilHeld(GateOp::kEventWait, 1, absl::Seconds(5));
  f.wait_for(kBlocked);
  device_->gate().Release(GateOp::kEventWait);
  ASSERT_EQ(f.wait_for(kBound), std::future_status::ready) << "step hung";
  auto [b, e] = f.get();
  EXPECT_EQ(b, 0) << "a lease saw wrong bytes and was told OK";
  ASSERT_TRUE(QueuedLoadsEnd());
  for (int k = 0; k < kTensors; ++k) {
    absl::StatusOr<std::vector<std::byte>> got = ReadAll(k);
    if (!got.ok()) got = ReadAll(k);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(MatchesPattern(got->data(), kSize, 7 + k)) << "t" << k;
  }
  const Stats s = store_->GetStats();
  EXPECT_EQ(s.queued_loads_in_flight, 0u);
  std::cout << "queued_loads=" << s.queued_loads
            << " injected=" << device_->injected() << " errs=" << e
            << " prefetch_hit=" << s.prefetch.hit << "\n";
}

}  // namespace
}  // namespace strata
