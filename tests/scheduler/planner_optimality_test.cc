// The residency planner against the best plan an exhaustive search finds,
// on small random steps: the planner's NVMe bytes must come within 5% of
// the optimum's (the optimality target), and the floors must not
// pass the fewest reads and writes of any plan.
//
// The search is written here from the model's definition (residency_plan.h),
// not from the planner's code: every live gap of an NVMe-homed tensor
// between two upper-tier uses waits on the device, on the host, or on
// NVMe; the device and host each hold their leases and the gaps placed
// there within budget at every position; NVMe carries a read per live gap
// placed there and one write-back per dirty version with such a gap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "scheduler/residency_plan.h"

namespace strata {
namespace {

struct OracleGap {
  uint32_t tensor = 0;
  uint32_t version = 0;
  std::vector<uint32_t> positions;  // where the copy waits
};

struct Oracle {
  const PlanInput& in;
  std::vector<OracleGap> gaps;
  std::vector<uint8_t> version_dirty;
  // Bytes the leases hold on the device (0) and host (1) at each position.
  std::vector<int64_t> used[2];
  uint64_t best = std::numeric_limits<uint64_t>::max();
  // The fewest reads and writes of any plan (each of its own plan).
  uint64_t fewest_reads = std::numeric_limits<uint64_t>::max();
  uint64_t fewest_writes = std::numeric_limits<uint64_t>::max();
  std::vector<int> choice;

  explicit Oracle(const PlanInput& input) : in(input) {
    const uint32_t n = static_cast<uint32_t>(in.accesses.size());
    used[0].assign(n, 0);
    used[1].assign(n, 0);
    for (uint32_t p = 0; p < n; ++p) {
      const PlanAccess& a = in.accesses[p];
      for (uint32_t q = p; q < a.hold_end; ++q) {
        used[static_cast<int>(a.tier)][q] += static_cast<int64_t>(
            in.tensors[a.tensor].tier_bytes[static_cast<int>(a.tier)]);
      }
    }
    for (uint32_t t = 0; t < in.tensors.size(); ++t) AddGaps(t);
  }

  // The tensors here are NVMe-homed, used on the device or host only, and
  // written at least once (the generator makes them so).
  void AddGaps(uint32_t t) {
    const uint32_t n = static_cast<uint32_t>(in.accesses.size());
    std::vector<uint32_t> uses;
    for (uint32_t p = 0; p < n; ++p) {
      if (in.accesses[p].tensor == t) uses.push_back(p);
    }
    for (size_t i = 0; i < uses.size(); ++i) {
      const uint32_t a = uses[i], b = uses[(i + 1) % uses.size()];
      // The version of the contents after a: a new one at each write.
      if (in.accesses[a].access != Access::kRead) version_dirty.push_back(1);
      if (in.accesses[b].access == Access::kOverwrite) continue;  // dead
      const uint32_t distance = b > a ? b - a : b + n - a;
      if (in.accesses[a].hold_end - a > distance)
        continue;  // still leased at b
      OracleGap g{.tensor = t};
      for (uint32_t q = in.accesses[a].hold_end % n; q != b; q = (q + 1) % n) {
        g.positions.push_back(q);
      }
      gaps.push_back(g);
      version_of_gap.push_back(a);
    }
  }
  std::vector<uint32_t> version_of_gap;  // the use that starts its version

  // NVMe bytes of the choices: reads, then writes.
  std::pair<uint64_t, uint64_t> Nvme() const {
    uint64_t reads = 0, writes = 0;
    std::vector<std::pair<uint32_t, uint32_t>> written;  // (tensor, version)
    for (size_t i = 0; i < gaps.size(); ++i) {
      if (choice[i] != 2) continue;
      const uint64_t b = in.tensors[gaps[i].tensor].bytes;
      reads += b;
      const auto key = std::make_pair(gaps[i].tensor, VersionStart(i));
      if (std::find(written.begin(), written.end(), key) == written.end()) {
        written.push_back(key);
        writes += b;  // the version's one write-back
      }
    }
    return {reads, writes};
  }

  // The write that started gap i's version: the last write at or before
  // its first use, cyclically.
  uint32_t VersionStart(size_t i) const {
    const uint32_t n = static_cast<uint32_t>(in.accesses.size());
    uint32_t p = version_of_gap[i];
    for (uint32_t k = 0; k < n; ++k) {
      const PlanAccess& a = in.accesses[(p + n - k) % n];
      if (a.tensor == gaps[i].tensor && a.access != Access::kRead) {
        return (p + n - k) % n;
      }
    }
    return p;
  }

  void Search(size_t i) {
    if (i == gaps.size()) {
      const auto [reads, writes] = Nvme();
      best = std::min(best, reads + writes);
      fewest_reads = std::min(fewest_reads, reads);
      fewest_writes = std::min(fewest_writes, writes);
      return;
    }
    for (int c = 0; c < 3; ++c) {
      if (c < 2 && !Hold(i, c, +1)) continue;
      choice[i] = c;
      Search(i + 1);
      if (c < 2) Hold(i, c, -1);
    }
  }

  // Adds gap i on tier c (0 device, 1 host); false (nothing added) when it
  // would pass the budget somewhere.
  bool Hold(size_t i, int c, int sign) {
    const auto bytes =
        static_cast<int64_t>(in.tensors[gaps[i].tensor].tier_bytes[c]);
    if (sign > 0) {
      for (uint32_t q : gaps[i].positions) {
        if (used[c][q] + bytes > static_cast<int64_t>(in.capacity[c])) {
          return false;
        }
      }
    }
    for (uint32_t q : gaps[i].positions) used[c][q] += sign * bytes;
    return true;
  }

  uint64_t Best() {
    choice.assign(gaps.size(), 2);
    Search(0);
    return best;
  }
};

// A random step: `tensors` tensors of 1..4 units, each used 2..3 times on
// the device or host, its first use a write; leases end at the next
// acquire, some a position later.
PlanInput RandomStep(std::mt19937& rng, int tensors) {
  PlanInput in;
  std::uniform_int_distribution<int> size(1, 4), uses(2, 3), coin(0, 3);
  std::vector<uint32_t> order;
  for (int t = 0; t < tensors; ++t) {
    const uint64_t bytes = 1024u * static_cast<uint64_t>(size(rng));
    in.tensors.push_back({.bytes = bytes, .tier_bytes = {bytes, bytes, bytes}});
    for (int k = uses(rng); k > 0; --k) order.push_back(t);
  }
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint8_t> seen(tensors, 0);
  const uint32_t n = static_cast<uint32_t>(order.size());
  for (uint32_t p = 0; p < n; ++p) {
    const uint32_t t = order[p];
    Access access = Access::kRead;
    if (!seen[t])
      access = coin(rng) == 0 ? Access::kOverwrite : Access::kWrite;
    else if (coin(rng) == 0)
      access = Access::kWrite;
    seen[t] = 1;
    in.accesses.push_back(
        {.tensor = t,
         .tier = coin(rng) == 0 ? Tier::kHost : Tier::kDevice,
         .access = access,
         .hold_end = std::min(n, p + 1 + (coin(rng) == 0 ? 1u : 0u))});
  }
  std::uniform_int_distribution<int> cap(2, 6);
  in.capacity = {1024u * static_cast<uint64_t>(cap(rng)),
                 1024u * static_cast<uint64_t>(cap(rng)), 0};
  return in;
}

// The step, for a failure's message.
std::string Describe(const PlanInput& in) {
  std::string out;
  for (size_t p = 0; p < in.accesses.size(); ++p) {
    const PlanAccess& a = in.accesses[p];
    absl::StrAppendFormat(&out, "%d: t%d %s %s lease to %d\n", p, a.tensor,
                          TierName(a.tier), AccessName(a.access), a.hold_end);
  }
  for (size_t t = 0; t < in.tensors.size(); ++t) {
    absl::StrAppendFormat(&out, "t%d: %d bytes\n", t, in.tensors[t].bytes);
  }
  absl::StrAppendFormat(&out, "budgets: device %d, host %d\n", in.capacity[0],
                        in.capacity[1]);
  return out;
}

// Leases that alone overflow a tier leave no plan to compare.
bool LeasesFit(const PlanInput& in) {
  const Oracle o(in);
  for (int c = 0; c < 2; ++c) {
    for (int64_t u : o.used[c]) {
      if (u > static_cast<int64_t>(in.capacity[c])) return false;
    }
  }
  return true;
}

// And the floors (scheduler/nvme_floor.h) are lower bounds: no plan reads
// or writes less. Where they are tight is printed, not asserted: a bound is
// only as tight as its relaxation.
TEST(PlannerOptimalityTest, WithinFivePercentOfExhaustiveSearch) {
  std::mt19937 rng(20261207);
  int compared = 0, optimal = 0, tight = 0;
  uint64_t planned_total = 0, best_total = 0, floor_total = 0;
  while (compared < 200) {
    const PlanInput in = RandomStep(rng, 4);
    Oracle oracle(in);
    if (!LeasesFit(in) || oracle.gaps.size() > 9) continue;
    const uint64_t best = oracle.Best();
    const absl::StatusOr<ResidencyPlan> plan = PlanResidency(in);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const uint64_t planned = plan->nvme_bytes();
    EXPECT_GE(planned, best) << "the search missed a plan\n" << Describe(in);
    EXPECT_LE(planned * 100, best * 105) << Describe(in);
    EXPECT_LE(plan->nvme_read_floor_bytes, oracle.fewest_reads) << Describe(in);
    EXPECT_LE(plan->nvme_write_floor_bytes, oracle.fewest_writes)
        << Describe(in);
    const uint64_t floors =
        plan->nvme_read_floor_bytes + plan->nvme_write_floor_bytes;
    optimal += planned == best ? 1 : 0;
    tight += floors == best ? 1 : 0;
    planned_total += planned;
    best_total += best;
    floor_total += floors;
    ++compared;
  }
  RecordProperty("optimal_cases", optimal);
  // Most steps come out optimal; the assertions above are the target.
  std::printf(
      "planner: optimal in %d of %d steps; NVMe bytes %.4fx optimum; the "
      "floors equal to it in %d, %.4fx it\n",
      optimal, compared,
      static_cast<double>(planned_total) / std::max<uint64_t>(1, best_total),
      tight,
      static_cast<double>(floor_total) / std::max<uint64_t>(1, best_total));
}

}  // namespace
}  // namespace strata
