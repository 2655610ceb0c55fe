// race_test_util.cc: waiting for shown states, and the prefetch barrier.
#include "tests/util/race_test_util.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/util/test_util.h"

namespace strata::testing {

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

uint64_t AcquiresObserved(const Store& store) {
  return store.GetStats().scheduler.accesses;
}

PrefetchBarrier::PrefetchBarrier(Store* store, FaultyBlockIo* io)
    : store_(store), io_(io) {
  constexpr uint64_t kBytes = 4096;
  auto id = store_->Create(
      {.name = "prefetch-barrier", .size_bytes = kBytes, .home = Tier::kNvme});
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return;
  marker_ = *id;
  EXPECT_TRUE(store_->Write(marker_, Pattern(kBytes, 1).data(), kBytes).ok());
  EXPECT_TRUE(store_->Evict(marker_, Tier::kNvme).ok());  // NVMe only
}

void PrefetchBarrier::Wait() {
  // Its host copy goes, so the marker's prefetch must read NVMe (Evict
  // first waits for the last marker's load).
  ASSERT_TRUE(store_->Evict(marker_, Tier::kNvme).ok());
  Gate& gate = io_->gate();
  gate.Arm(GateOp::kNvmeRead);
  ASSERT_TRUE(store_->Prefetch(marker_, Tier::kHost).ok());
  ASSERT_TRUE(gate.WaitUntilHeld(GateOp::kNvmeRead))
      << "the barrier's prefetch never read NVMe";
  const auto residency = store_->GetResidency(marker_);
  const bool marker_held =
      residency.ok() && residency->tiers[static_cast<int>(Tier::kHost)] ==
                            Residency::State::kLoading;
  gate.Release(GateOp::kNvmeRead);
  ASSERT_TRUE(marker_held)
      << "the gate held another prefetch's NVMe read, not the barrier's: "
         "the prefetches before the barrier must not read NVMe";
}

}  // namespace strata::testing
