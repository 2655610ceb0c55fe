// StepPlans (src/step_plans.h), the executor's bookkeeping: when a step
// shape is planned (again), which of a plan's transfers fall due as a step
// goes, and where the plan keeps a copy.
#include "src/step_plans.h"

#include <gtest/gtest.h>

#include <vector>

namespace strata {
namespace {

// A 6-acquire trace, as a shape with `steps` steps ended on it.
class StepPlansTest : public ::testing::Test {
 protected:
  StepPlansTest() {
    for (uint64_t i = 1; i <= 6; ++i) {
      trace_.Append({TensorId{i}, Tier::kDevice, Access::kRead});
    }
  }
  StepShape Shape(uint64_t steps, uint64_t generation = 1) const {
    return {.serial = 7,
            .generation = generation,
            .steps = steps,
            .trace = &trace_};
  }
  // A plan of tensor 0 (store id 1): loaded to the device at position 1
  // for its use at 3, dropped at 4; on the host over [4, 1) (wrapping).
  static ResidencyPlan Plan() {
    ResidencyPlan plan;
    plan.transfers = {
        {.tensor = 0,
         .kind = TransferKind::kLoad,
         .from = Tier::kHost,
         .to = Tier::kDevice,
         .access = 3,
         .issue_at = 1},
        {.tensor = 0,
         .kind = TransferKind::kDrop,
         .from = Tier::kDevice,
         .access = 3,
         .issue_at = 4},
    };
    plan.residencies = {{.tensor = 0, .tier = Tier::kHost, .from = 4, .to = 1}};
    return plan;
  }
  Trace trace_;
};

TEST_F(StepPlansTest, PlansTheFirstStepsThenEachPowerOfTwo) {
  StepPlans plans;
  EXPECT_TRUE(plans.NeedsPlan(Shape(1)));
  std::vector<uint64_t> planned;
  for (uint64_t steps = 1; steps <= 40; ++steps) {
    if (plans.NeedsPlan(Shape(steps))) {
      planned.push_back(steps);
      plans.Set(Shape(steps), Plan(), {TensorId{1}});
    }
    EXPECT_FALSE(plans.NeedsPlan(Shape(steps))) << "planned twice at " << steps;
  }
  EXPECT_EQ(planned, (std::vector<uint64_t>{1, 2, 3, 4, 8, 16, 32}));
  // A re-recorded trace (or a learned access kind) is planned at once.
  EXPECT_TRUE(plans.NeedsPlan(Shape(41, /*generation=*/2)));
}

TEST_F(StepPlansTest, TransfersFallDueOncePerStepInPositionOrder) {
  StepPlans plans;
  plans.Set(Shape(1), Plan(), {TensorId{1}});
  EXPECT_TRUE(plans.Due(7, /*step=*/1, 0).empty());
  absl::Span<const PlannedTransfer> due = plans.Due(7, 1, 2);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].kind, TransferKind::kLoad);
  EXPECT_TRUE(plans.Due(7, 1, 2).empty());  // not again in the same step
  // A jump past position 4 issues what fell due on the way.
  due = plans.Due(7, 1, 5);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].kind, TransferKind::kDrop);
  // The next step starts over; an unknown trace has no plan.
  EXPECT_EQ(plans.Due(7, 2, 5).size(), 2u);
  EXPECT_TRUE(plans.Due(8, 2, 5).empty());
}

TEST_F(StepPlansTest, KeepsCoversResidenciesAndLoadWindowsCyclically) {
  StepPlans plans;
  plans.Set(Shape(1), Plan(), {TensorId{1}});
  const StepPlans::Entry& e = *plans.Find(7);
  // Host over [4, 1): positions 4, 5, 0.
  for (uint32_t p = 0; p < 6; ++p) {
    EXPECT_EQ(StepPlans::Keeps(e, TensorId{1}, Tier::kHost, p),
              p == 4 || p == 5 || p == 0)
        << p;
  }
  // Device from the load's issue (1) to its use (3).
  for (uint32_t p = 0; p < 6; ++p) {
    EXPECT_EQ(StepPlans::Keeps(e, TensorId{1}, Tier::kDevice, p),
              p == 1 || p == 2)
        << p;
  }
  // A tensor the plan does not know, and NVMe, are always kept.
  EXPECT_TRUE(StepPlans::Keeps(e, TensorId{99}, Tier::kDevice, 2));
  EXPECT_TRUE(StepPlans::Keeps(e, TensorId{1}, Tier::kNvme, 2));
  // Dropping the trace drops its plan.
  plans.Retain({});
  EXPECT_EQ(plans.Find(7), nullptr);
}

}  // namespace
}  // namespace strata
