// Unit tests for PlanResidency (scheduler/residency_plan.h) on hand-built
// steps: what stays, what moves and over which link, what is never written
// back, contents kept until their discard or overwrite (dies_at), when
// loads are issued, what the simulation predicts, the floors, and bad
// input.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "scheduler/residency_plan.h"

namespace strata {
namespace {

constexpr uint64_t kKiB = 1024;

class StepBuilder {
 public:
  uint32_t Tensor(uint64_t bytes, Tier home = Tier::kNvme) {
    in_.tensors.push_back(
        {.bytes = bytes, .tier_bytes = {bytes, bytes, bytes}, .home = home});
    return static_cast<uint32_t>(in_.tensors.size() - 1);
  }
  // An acquire `seconds` after the previous one, released before the next
  // acquire (or `held` acquires later).
  StepBuilder& Use(uint32_t t, Tier tier, Access access, double seconds = 0,
                   uint32_t held = 1) {
    const double at =
        in_.accesses.empty() ? 0 : in_.accesses.back().at_seconds + seconds;
    const auto p = static_cast<uint32_t>(in_.accesses.size());
    in_.accesses.push_back({.tensor = t,
                            .tier = tier,
                            .access = access,
                            .hold_end = p + held,
                            .at_seconds = at});
    return *this;
  }
  PlanInput Build(uint64_t device, uint64_t host, double step_seconds = 0,
                  double gbps = 0) {
    in_.capacity = {device, host, 0};
    in_.step_seconds = step_seconds;
    in_.link_bytes_per_second.fill(gbps * 1e9);
    return in_;
  }

 private:
  PlanInput in_;
};

uint64_t LinkBytes(const ResidencyPlan& plan, Link link) {
  return plan.link_bytes[static_cast<int>(link)];
}

int Count(const ResidencyPlan& plan, TransferKind kind) {
  return static_cast<int>(
      std::count_if(plan.transfers.begin(), plan.transfers.end(),
                    [&](const PlannedTransfer& t) { return t.kind == kind; }));
}

// A training-like step: a weight read in forward and backward on the
// device and updated by the host optimizer; an activation written in
// forward and read in backward; a gradient written in backward and read by
// the optimizer.
struct TrainStep {
  StepBuilder b;
  uint32_t weight, activation, gradient;
  explicit TrainStep(uint64_t bytes = 4 * kKiB) {
    weight = b.Tensor(bytes);
    activation = b.Tensor(bytes);
    gradient = b.Tensor(bytes);
    b.Use(weight, Tier::kDevice, Access::kRead)
        .Use(activation, Tier::kDevice, Access::kOverwrite)
        .Use(activation, Tier::kDevice, Access::kRead)
        .Use(weight, Tier::kDevice, Access::kRead)
        .Use(gradient, Tier::kDevice, Access::kOverwrite)
        .Use(gradient, Tier::kHost, Access::kRead)
        .Use(weight, Tier::kHost, Access::kWrite);
  }
};

TEST(PlannerTest, WhatFitsStaysAndNothingMoves) {
  TrainStep step;
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(step.b.Build(64 * kKiB, 64 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  EXPECT_EQ(plan->nvme_read_floor_bytes, 0u);
  // The activation never leaves the device (its dead copy is dropped
  // after backward); the weight and gradient cross the link where their
  // uses change tier.
  EXPECT_NE(std::find(plan->stays_device.begin(), plan->stays_device.end(),
                      step.activation),
            plan->stays_device.end());
  for (const PlannedTransfer& t : plan->transfers) {
    if (t.tensor == step.activation) {
      EXPECT_EQ(t.kind, TransferKind::kDrop) << TransferKindName(t.kind);
    }
  }
  EXPECT_EQ(Count(*plan, TransferKind::kWriteBack), 0);
}

// The device holds only the leases: the weight waits on the host between
// its uses, and since the device only reads it, its host copy stays valid:
// it crosses H2D twice (forward, backward) and never D2H.
TEST(PlannerTest, AWeightTheDeviceOnlyReadsKeepsItsHostCopy) {
  TrainStep step;
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(step.b.Build(4 * kKiB, 64 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  uint64_t weight_h2d = 0, weight_d2h = 0;
  for (const PlannedTransfer& t : plan->transfers) {
    if (t.tensor != step.weight) continue;
    if (t.to == Tier::kDevice) weight_h2d += t.bytes;
    if (t.from == Tier::kDevice && t.kind != TransferKind::kDrop) {
      weight_d2h += t.bytes;
    }
  }
  EXPECT_EQ(weight_h2d, 8 * kKiB);
  EXPECT_EQ(weight_d2h, 0u);
  EXPECT_LE(plan->peak_bytes[0], 4 * kKiB);
}

// With room for one tensor above NVMe besides the leases, contents that
// die (the activation after backward, the gradient after the optimizer)
// are dropped, never written back, and what goes to NVMe is read once.
TEST(PlannerTest, DeadContentsAreDroppedNotWrittenBack) {
  TrainStep step;
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(step.b.Build(4 * kKiB, 4 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlannedTransfer& t : plan->transfers) {
    if (t.kind == TransferKind::kWriteBack) {
      EXPECT_EQ(t.tensor, step.weight) << "only the weight lives across";
    }
  }
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeWrite),
            LinkBytes(*plan, Link::kNvmeRead) > 0 ? 4 * kKiB : 0);
  EXPECT_GE(LinkBytes(*plan, Link::kNvmeRead), plan->nvme_read_floor_bytes);
}

// A tensor the step only reads is clean: going to NVMe costs its read and
// no write.
TEST(PlannerTest, ACleanTensorIsReadNeverWritten) {
  StepBuilder b;
  const uint32_t table = b.Tensor(8 * kKiB);
  const uint32_t other = b.Tensor(8 * kKiB);
  b.Use(table, Tier::kDevice, Access::kRead)
      .Use(other, Tier::kDevice, Access::kWrite)
      .Use(table, Tier::kDevice, Access::kRead)
      .Use(other, Tier::kDevice, Access::kWrite);
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(8 * kKiB, 0));
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Each lease fills the device: both go out between every two uses. The
  // table is read twice and never written; `other` is read twice and
  // written back twice (each write makes a version).
  uint64_t table_write = 0;
  for (const PlannedTransfer& t : plan->transfers) {
    if (t.tensor == table && t.kind == TransferKind::kWriteBack) {
      table_write += t.bytes;
    }
  }
  EXPECT_EQ(table_write, 0u);
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeRead), 32 * kKiB);
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeWrite), 16 * kKiB);
  // At every position one tensor is leased and the other waits: 16 KiB,
  // 8 above NVMe, so every wait is read back and each version of `other`
  // written. The plan meets its floors.
  EXPECT_EQ(plan->nvme_read_floor_bytes, 32 * kKiB);
  EXPECT_EQ(plan->nvme_write_floor_bytes, 16 * kKiB);
}

// Accesses 1 ms apart; a 2.5 ms load must start three positions ahead of
// its use (the last position whose time is at or before need - 2.5 ms),
// and then nothing waits.
TEST(PlannerTest, ALoadIsIssuedAtTheLatestPositionThatLetsItFinish) {
  StepBuilder b;
  const uint32_t w = b.Tensor(2500 * kKiB);
  const uint32_t x = b.Tensor(kKiB);
  b.Use(w, Tier::kHost, Access::kWrite);
  for (int i = 0; i < 8; ++i) b.Use(x, Tier::kDevice, Access::kWrite, 1e-3);
  b.Use(w, Tier::kDevice, Access::kRead, 1e-3);
  // 1.024 GB/s: 2,560,000 bytes in 2.5 ms.
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(2600 * kKiB, 4000 * kKiB, 10e-3, 1.024));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto load = std::find_if(
      plan->transfers.begin(), plan->transfers.end(), [&](const auto& t) {
        return t.tensor == w && t.kind == TransferKind::kLoad;
      });
  ASSERT_NE(load, plan->transfers.end());
  EXPECT_EQ(load->access, 9u);
  EXPECT_EQ(load->issue_at, 6u);  // 6 ms; 7 ms would finish at 9.5
  EXPECT_NEAR(load->start_seconds, 6.5e-3, 1e-9);
  EXPECT_EQ(plan->predicted_stalls, 0u);
  EXPECT_NEAR(plan->predicted_seconds, 10e-3, 1e-9);
}

// Two loads needed back to back on one link: the simulation shows the
// first one in the way of the second and moves it earlier, so nothing
// waits.
TEST(PlannerTest, LoadsQueuedOnOneLinkStartEarlierTogether) {
  StepBuilder b;
  const uint32_t u = b.Tensor(1000 * kKiB);
  const uint32_t v = b.Tensor(1000 * kKiB);
  const uint32_t x = b.Tensor(kKiB);
  b.Use(u, Tier::kHost, Access::kWrite).Use(v, Tier::kHost, Access::kWrite);
  for (int i = 0; i < 8; ++i) b.Use(x, Tier::kDevice, Access::kWrite, 1e-3);
  b.Use(u, Tier::kDevice, Access::kRead, 1e-3)
      .Use(v, Tier::kDevice, Access::kRead, 1e-6);
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(2100 * kKiB, 4000 * kKiB, 12e-3, 1.024));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->predicted_stalls, 0u);
  EXPECT_NEAR(plan->predicted_seconds, 12e-3, 1e-9);
}

// A link that cannot carry the step's reads in its compute time. Four
// 1,000 KiB weights read on the host, 0.1 ms of compute apart, NVMe at
// 1.024 GB/s (1 ms a weight); the host holds two. Keeping one weight there
// for the whole step saves a read and leaves room to load ahead only while
// the kept one is the lease, one position (0.1 ms) before the next weight:
// 3 ms of loads less 0.1 ms of overlap, plus 0.4 ms of compute. That
// beats streaming all four (4 ms on the link), and the plan says so.
TEST(PlannerTest, ASaturatedLinkSetsThePredictedStep) {
  StepBuilder b;
  std::vector<uint32_t> weights;
  for (int i = 0; i < 4; ++i) weights.push_back(b.Tensor(1000 * kKiB));
  for (uint32_t w : weights) b.Use(w, Tier::kHost, Access::kRead, 1e-4);
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(0, 2000 * kKiB, 4e-4, 1.024));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeRead), 3000 * kKiB);
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeWrite), 0u);
  EXPECT_EQ(plan->stays_host.size(), 1u);
  EXPECT_EQ(plan->predicted_stalls, 3u);
  EXPECT_NEAR(plan->predicted_seconds, 3.3e-3, 1e-6);
  // The floor: at each position 2,000 KiB of the three waiting weights
  // cannot stay; a byte evicted for a whole wait covers three positions,
  // so at least 8,000 / 3 KiB are read: 2.667 ms (short of it by at most
  // the bytes crossing the sweep's cut over its copies, nvme_floor.h).
  EXPECT_LE(plan->bound_seconds, 8e-3 / 3);
  EXPECT_GT(plan->bound_seconds, 8e-3 / 3 * 0.999);
}

TEST(PlannerTest, LeasesThatOverflowATierAreReported) {
  StepBuilder b;
  const uint32_t big = b.Tensor(10 * kKiB);
  b.Use(big, Tier::kDevice, Access::kWrite);
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(4 * kKiB, 64 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->overflow_bytes[0], 6 * kKiB);
  EXPECT_EQ(plan->overflow_bytes[1], 0u);
}

TEST(PlannerTest, BadInputIsInvalidArgument) {
  StepBuilder b;
  const uint32_t t = b.Tensor(kKiB);
  b.Use(t, Tier::kDevice, Access::kWrite).Use(t, Tier::kDevice, Access::kRead);
  const PlanInput good = b.Build(kKiB, kKiB);
  ASSERT_TRUE(PlanResidency(good).ok());
  PlanInput bad = good;
  bad.accesses[1].tensor = 5;
  EXPECT_EQ(PlanResidency(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.accesses[0].hold_end = 0;
  EXPECT_EQ(PlanResidency(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.accesses[1].hold_end = 3;
  EXPECT_EQ(PlanResidency(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.accesses[0].at_seconds = 1;
  EXPECT_EQ(PlanResidency(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.link_bytes_per_second[2] = -1;
  EXPECT_EQ(PlanResidency(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PlanResidency(PlanInput{})->transfers.empty());
}

// Contents the next use overwrites (PlanAccess::dies_at). A 4 KiB tensor A
// written on the device at 0 and overwritten there at 3; between them a
// filler X is leased at 1 and 2 (on a 4 KiB device only the leases fit).
struct OverwriteStep {
  StepBuilder b;
  uint32_t a, x;
  OverwriteStep() {
    a = b.Tensor(4 * kKiB);
    x = b.Tensor(4 * kKiB);
    b.Use(a, Tier::kDevice, Access::kOverwrite)
        .Use(x, Tier::kDevice, Access::kOverwrite)
        .Use(x, Tier::kDevice, Access::kRead)
        .Use(a, Tier::kDevice, Access::kOverwrite);
  }
};

// The transfers of one kind for `tensor`.
std::vector<PlannedTransfer> Of(const ResidencyPlan& plan, uint32_t tensor,
                                TransferKind kind) {
  std::vector<PlannedTransfer> out;
  for (const PlannedTransfer& t : plan.transfers) {
    if (t.tensor == tensor && t.kind == kind) out.push_back(t);
  }
  return out;
}

// The default: A's contents die when its lease ends, so they need no room
// on the full device and cost no NVMe bytes.
TEST(PlannerTest, DeadAtReleaseNeedsNoRoomNorBytes) {
  OverwriteStep step;
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(step.b.Build(4 * kKiB, 64 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  EXPECT_EQ(plan->overflow_bytes[0], 0u);
  EXPECT_LE(plan->peak_bytes[0], 4 * kKiB);
  for (const PlannedTransfer& t : plan->transfers) {
    EXPECT_EQ(t.kind, TransferKind::kDrop) << TransferKindName(t.kind);
  }
}

// Never discarded, A's contents are kept until the overwrite at 3: with no
// room for them above NVMe they go out, written back once and never read;
// with room on the host they move there (D2H, no NVMe byte) and are dropped
// at the overwrite; with room on the device they stay there.
TEST(PlannerTest, KeptToOverwriteIsWrittenNotRead) {
  OverwriteStep step;
  PlanInput input = step.b.Build(4 * kKiB, 0);
  input.accesses[0].dies_at = PlanAccess::kKeptToOverwrite;
  absl::StatusOr<ResidencyPlan> plan = PlanResidency(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeWrite), 4 * kKiB);
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeRead), 0u);
  const std::vector<PlannedTransfer> written =
      Of(*plan, step.a, TransferKind::kWriteBack);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].from, Tier::kDevice);
  EXPECT_EQ(written[0].to, Tier::kNvme);
  EXPECT_EQ(written[0].bytes, 4 * kKiB);
  EXPECT_EQ(written[0].access, 0u);
  EXPECT_TRUE(Of(*plan, step.a, TransferKind::kLoad).empty());
  EXPECT_TRUE(Of(*plan, step.a, TransferKind::kMove).empty());
  EXPECT_LE(plan->peak_bytes[0], 4 * kKiB);

  input.capacity[1] = 64 * kKiB;
  plan = PlanResidency(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  const std::vector<PlannedTransfer> moved =
      Of(*plan, step.a, TransferKind::kMove);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].from, Tier::kDevice);
  EXPECT_EQ(moved[0].to, Tier::kHost);
  EXPECT_EQ(LinkBytes(*plan, Link::kD2H), 4 * kKiB);
  EXPECT_TRUE(Of(*plan, step.a, TransferKind::kLoad).empty());

  input.capacity = {8 * kKiB, 0, 0};
  plan = PlanResidency(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  EXPECT_TRUE(Of(*plan, step.a, TransferKind::kWriteBack).empty());
  bool dropped_at_overwrite = false;
  for (const PlannedTransfer& t : Of(*plan, step.a, TransferKind::kDrop)) {
    if (t.from == Tier::kDevice && t.access == 0 && t.issue_at == 3) {
      dropped_at_overwrite = true;
    }
  }
  EXPECT_TRUE(dropped_at_overwrite);
  EXPECT_EQ(plan->peak_bytes[0], 8 * kKiB) << "A beside X's lease";
}

// Two 4 KiB tensors on an 8 KiB device (no host): A written at 0 and
// discarded before 2, B written at 1 and read at 4, a filler F leased at 2
// and 3. A's kept contents end at 2, where B's wait begins: both fit, no
// NVMe bytes. Kept to the overwrite at 5, A overlaps B's wait beside F's
// lease (12 KiB): the cheaper one goes out, A (written, 4 KiB) rather than
// B (written and read, 8 KiB).
TEST(PlannerTest, DiesAtFreesRoomForAnother) {
  StepBuilder b;
  const uint32_t a = b.Tensor(4 * kKiB);
  const uint32_t bb = b.Tensor(4 * kKiB);
  const uint32_t f = b.Tensor(4 * kKiB);
  b.Use(a, Tier::kDevice, Access::kOverwrite)
      .Use(bb, Tier::kDevice, Access::kOverwrite)
      .Use(f, Tier::kDevice, Access::kOverwrite)
      .Use(f, Tier::kDevice, Access::kRead)
      .Use(bb, Tier::kDevice, Access::kRead)
      .Use(a, Tier::kDevice, Access::kOverwrite);
  PlanInput input = b.Build(8 * kKiB, 0);
  input.accesses[0].dies_at = 2;
  absl::StatusOr<ResidencyPlan> plan = PlanResidency(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  EXPECT_TRUE(Of(*plan, bb, TransferKind::kLoad).empty());
  const std::vector<PlannedTransfer> drops = Of(*plan, a, TransferKind::kDrop);
  EXPECT_TRUE(std::any_of(drops.begin(), drops.end(), [](const auto& t) {
    return t.from == Tier::kDevice && t.issue_at == 2;
  })) << "A's copy is freed where its contents die";
  EXPECT_LE(plan->peak_bytes[0], 8 * kKiB);

  input.accesses[0].dies_at = PlanAccess::kKeptToOverwrite;
  plan = PlanResidency(input);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeWrite), 4 * kKiB);
  EXPECT_EQ(LinkBytes(*plan, Link::kNvmeRead), 0u);
  EXPECT_EQ(Of(*plan, a, TransferKind::kWriteBack).size(), 1u);
  EXPECT_TRUE(Of(*plan, bb, TransferKind::kWriteBack).empty());
  EXPECT_TRUE(Of(*plan, bb, TransferKind::kLoad).empty());
  EXPECT_LE(plan->peak_bytes[0], 8 * kKiB);
}

// dies_at is a position of the step or one of the two sentinels.
TEST(PlannerTest, DiesAtOutOfRangeIsInvalid) {
  OverwriteStep step;
  const PlanInput good = step.b.Build(8 * kKiB, 0);
  const uint32_t n = static_cast<uint32_t>(good.accesses.size());
  for (uint32_t dies_at :
       {0u, n - 1, PlanAccess::kDiesAtRelease, PlanAccess::kKeptToOverwrite}) {
    PlanInput input = good;
    input.accesses[0].dies_at = dies_at;
    EXPECT_TRUE(PlanResidency(input).ok()) << dies_at;
  }
  for (uint32_t dies_at : {n, n + 7, PlanAccess::kDiesAtRelease - 1}) {
    PlanInput input = good;
    input.accesses[0].dies_at = dies_at;
    EXPECT_EQ(PlanResidency(input).status().code(),
              absl::StatusCode::kInvalidArgument)
        << dies_at;
  }
}

// A weight written on the host (0) and read twice on the device (2, 5);
// fillers keep the device full of leases everywhere else (X at 1, Y at 3
// and 4, Z at 6), the host has room for it all step. It waits on the host
// between the reads, whose host copy stays valid (no move back): the
// device copy is dropped after each read instead of staying there.
TEST(PlannerTest, KeptHostCopyDropsTheDeviceCopyAfterARead) {
  StepBuilder b;
  const uint32_t w = b.Tensor(4 * kKiB);
  const uint32_t x = b.Tensor(4 * kKiB);
  const uint32_t y = b.Tensor(4 * kKiB);
  const uint32_t z = b.Tensor(4 * kKiB);
  b.Use(w, Tier::kHost, Access::kWrite)
      .Use(x, Tier::kDevice, Access::kOverwrite)
      .Use(w, Tier::kDevice, Access::kRead)
      .Use(y, Tier::kDevice, Access::kOverwrite)
      .Use(y, Tier::kDevice, Access::kRead)
      .Use(w, Tier::kDevice, Access::kRead)
      .Use(z, Tier::kDevice, Access::kOverwrite);
  const absl::StatusOr<ResidencyPlan> plan =
      PlanResidency(b.Build(4 * kKiB, 64 * kKiB));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->nvme_bytes(), 0u);
  EXPECT_EQ(plan->overflow_bytes[0], 0u);
  EXPECT_TRUE(Of(*plan, w, TransferKind::kMove).empty());
  EXPECT_EQ(Of(*plan, w, TransferKind::kLoad).size(), 2u);
  std::vector<uint32_t> dropped_after;  // the device reads followed by a drop
  for (const PlannedTransfer& t : Of(*plan, w, TransferKind::kDrop)) {
    if (t.from == Tier::kDevice) dropped_after.push_back(t.access);
  }
  std::sort(dropped_after.begin(), dropped_after.end());
  EXPECT_EQ(dropped_after, (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(LinkBytes(*plan, Link::kH2D), 8 * kKiB);
  EXPECT_EQ(LinkBytes(*plan, Link::kD2H), 0u);
  EXPECT_LE(plan->peak_bytes[0], 4 * kKiB);
}

// On random timed steps whose leases fit, the plan's peak, loads in flight
// and copies being written back included, stays within each budget, and
// its NVMe bytes are at least the floors.
TEST(PlannerTest, RandomTimedStepsStayWithinBudget) {
  std::mt19937 rng(44);
  std::uniform_int_distribution<int> size(1, 8), tier(0, 2), kind(0, 3);
  int planned = 0;
  for (int trial = 0; trial < 200; ++trial) {
    StepBuilder b;
    for (int t = 0; t < 12; ++t) b.Tensor(kKiB * size(rng));
    std::uniform_int_distribution<uint32_t> pick(0, 11);
    for (int p = 0; p < 40; ++p) {
      b.Use(pick(rng), tier(rng) == 0 ? Tier::kHost : Tier::kDevice,
            kind(rng) == 0 ? Access::kWrite : Access::kRead, 1e-4);
    }
    const absl::StatusOr<ResidencyPlan> plan =
        PlanResidency(b.Build(24 * kKiB, 24 * kKiB, 4e-3, 0.05));
    ASSERT_TRUE(plan.ok()) << plan.status();
    if (plan->overflow_bytes[0] > 0 || plan->overflow_bytes[1] > 0) continue;
    ++planned;
    EXPECT_LE(plan->peak_bytes[0], 24 * kKiB) << "trial " << trial;
    EXPECT_LE(plan->peak_bytes[1], 24 * kKiB) << "trial " << trial;
    EXPECT_GE(LinkBytes(*plan, Link::kNvmeRead), plan->nvme_read_floor_bytes);
    EXPECT_GE(LinkBytes(*plan, Link::kNvmeWrite), plan->nvme_write_floor_bytes);
    EXPECT_GE(plan->predicted_seconds, 4e-3 - 1e-12);
  }
  EXPECT_GT(planned, 100);
}

}  // namespace
}  // namespace strata
