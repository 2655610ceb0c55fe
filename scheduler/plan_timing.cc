// plan_timing.cc: SimulateStep, and the timing of a plan's loads
// (TimeTransfers) with the room they hold (TransferOverflow).
#include "scheduler/plan_timing.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "scheduler/plan_phases.h"

namespace strata {
namespace {

constexpr double kNever = -std::numeric_limits<double>::infinity();

// The queue a transfer waits in: NVMe (reads and writes share the disk),
// else its device-link direction.
int QueueOf(const PlannedTransfer& t) {
  if (t.from == Tier::kNvme || t.to == Tier::kNvme) return 2;
  return t.to == Tier::kDevice ? 0 : 1;
}

double StepSeconds(const PlanInput& input) {
  return std::max(input.step_seconds, input.accesses.back().at_seconds);
}

// Transfers issued at each position: what follows a use first (it frees
// room and goes ahead of reads on NVMe), then loads, nearest use first.
std::vector<std::vector<uint32_t>> ByIssue(
    size_t n, const std::vector<PlannedTransfer>& transfers) {
  std::vector<std::vector<uint32_t>> at(n);
  for (uint32_t i = 0; i < transfers.size(); ++i) {
    at[transfers[i].issue_at].push_back(i);
  }
  for (size_t p = 0; p < n; ++p) {
    std::stable_sort(at[p].begin(), at[p].end(), [&](uint32_t a, uint32_t b) {
      const auto key = [&](const PlannedTransfer& t) {
        if (t.kind != TransferKind::kLoad) return size_t{0};
        return 1 + (t.access + n - p) % n;
      };
      return key(transfers[a]) < key(transfers[b]);
    });
  }
  return at;
}

// The latest position, going back from use `b` at most `max_back`
// positions, whose time is at or before `latest` (seconds from the step's
// start; negative: the previous step).
uint32_t IssueAt(const PlanInput& input, uint32_t b, double latest,
                 uint32_t max_back) {
  const auto& acc = input.accesses;
  const uint32_t n = static_cast<uint32_t>(acc.size());
  const auto time_at = [&](uint32_t q) { return acc[q].at_seconds; };
  uint32_t back = 0;
  if (latest >= time_at(b)) {
    back = 0;
  } else if (latest >= 0) {
    uint32_t q = b;
    uint32_t lo = 0, hi = b;  // the last q in [0, b] with time <= latest
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      if (time_at(mid) <= latest)
        lo = mid;
      else
        hi = mid - 1;
    }
    q = lo;
    back = b - q;
  } else {
    const double wrapped = latest + StepSeconds(input);
    if (b + 1 >= n || time_at(b + 1) > wrapped) {
      back = max_back;
    } else {
      uint32_t lo = b + 1, hi = n - 1;
      while (lo < hi) {
        const uint32_t mid = lo + (hi - lo + 1) / 2;
        if (time_at(mid) <= wrapped)
          lo = mid;
        else
          hi = mid - 1;
      }
      back = b + n - lo;
    }
  }
  back = std::min(back, max_back);
  return (b + n - back) % n;
}

// Per load, its latest start with the loads after it on its queue: each
// finishes by its use or by the next one's start, whichever is sooner.
std::vector<double> LatestStarts(const PlanInput& input,
                                 const std::vector<PlannedTransfer>& ts) {
  std::vector<double> latest(ts.size(), 0);
  std::vector<uint32_t> loads;
  for (uint32_t i = 0; i < ts.size(); ++i) {
    if (ts[i].kind == TransferKind::kLoad) loads.push_back(i);
  }
  std::stable_sort(loads.begin(), loads.end(), [&](uint32_t a, uint32_t b) {
    return ts[a].access > ts[b].access;
  });
  double next_start[3] = {std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::infinity()};
  for (uint32_t i : loads) {
    const int q = QueueOf(ts[i]);
    const double need = input.accesses[ts[i].access].at_seconds;
    latest[i] = std::min(need, next_start[q]) - TransferSeconds(input, ts[i]);
    next_start[q] = latest[i];
  }
  return latest;
}

}  // namespace

void SortByIssue(size_t n, std::vector<PlannedTransfer>& ts) {
  const auto key = [n](const PlannedTransfer& t) {
    const size_t order =
        t.kind == TransferKind::kLoad ? 1 + (t.access + n - t.issue_at) % n : 0;
    return std::make_pair(t.issue_at, order);
  };
  std::stable_sort(ts.begin(), ts.end(),
                   [&](const PlannedTransfer& a, const PlannedTransfer& b) {
                     return key(a) < key(b);
                   });
}

double TransferSeconds(const PlanInput& input, const PlannedTransfer& t) {
  double seconds = 0;
  for (Link link : LinksOf(t)) {
    const double rate = input.link_bytes_per_second[static_cast<int>(link)];
    if (rate > 0)
      seconds = std::max(seconds, static_cast<double>(t.bytes) / rate);
  }
  return seconds;
}

// The first position after `from` (cyclic, at most n - 1 on) whose time
// is `seconds` or more after from's.
uint32_t PositionAfter(const PlanInput& input, uint32_t from, double seconds) {
  const auto& acc = input.accesses;
  const uint32_t n = static_cast<uint32_t>(acc.size());
  const auto first_at_or_after = [&](uint32_t lo, uint32_t hi, double t) {
    return static_cast<uint32_t>(
        std::lower_bound(
            acc.begin() + lo, acc.begin() + hi, t,
            [](const PlanAccess& a, double v) { return a.at_seconds < v; }) -
        acc.begin());
  };
  const double target = acc[from].at_seconds + seconds;
  const uint32_t ahead = first_at_or_after(from + 1, n, target);
  if (ahead < n) return ahead;
  const uint32_t wrapped =
      first_at_or_after(0, from, target - StepSeconds(input));
  return wrapped < from ? wrapped : (from + n - 1) % n;
}

StepSimulation SimulateStep(const PlanInput& input,
                            const std::vector<PlannedTransfer>& transfers) {
  const size_t n = input.accesses.size();
  const double step = StepSeconds(input);
  const std::vector<std::vector<uint32_t>> by_issue = ByIssue(n, transfers);
  std::vector<double> seconds(transfers.size());
  for (size_t i = 0; i < transfers.size(); ++i) {
    seconds[i] = TransferSeconds(input, transfers[i]);
  }
  std::vector<double> ready(n, kNever);  // when the load for each use ends
  std::vector<int64_t> serving(n, -1);   // which transfer that load is
  double queue_free[3] = {0, 0, 0};
  double clock = 0, cycle_start = 0;
  StepSimulation sim;
  sim.wait_seconds.assign(transfers.size(), 0);
  constexpr int kCycles =
      2;  // the first fills the queues, the second is steady
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const bool last = cycle == kCycles - 1;
    cycle_start = clock;
    for (size_t p = 0; p < n; ++p) {
      for (uint32_t i : by_issue[p]) {
        const PlannedTransfer& t = transfers[i];
        if (t.kind == TransferKind::kDrop) continue;
        double& free = queue_free[QueueOf(t)];
        free = std::max(free, clock) + seconds[i];
        if (t.kind == TransferKind::kLoad) {
          ready[t.access] = free;
          serving[t.access] = i;
        }
      }
      if (ready[p] > clock) {
        const double wait = ready[p] - clock;
        if (last) {
          ++sim.stalls;
          sim.stall_seconds += wait;
          sim.wait_seconds[serving[p]] = wait;
        }
        clock = ready[p];
      }
      ready[p] = kNever;
      const double next = p + 1 < n ? input.accesses[p + 1].at_seconds : step;
      clock += std::max(0.0, next - input.accesses[p].at_seconds);
    }
  }
  sim.seconds = clock - cycle_start;
  return sim;
}

void TimeTransfers(const PlanModel& model, ResidencyPlan* plan) {
  const PlanInput& input = model.input();
  const uint32_t n = static_cast<uint32_t>(input.accesses.size());
  std::vector<PlannedTransfer> ts = BuildTransfers(model);
  plan->link_bytes = {};
  for (const PlannedTransfer& t : ts) {
    for (Link link : LinksOf(t)) {
      plan->link_bytes[static_cast<int>(link)] += t.bytes;
    }
  }
  // The earliest a load may go: its gap's begin (the use before it ended).
  std::vector<uint32_t> max_back(n, 0);
  for (const PlanGap& g : model.gaps()) max_back[g.to_access] = g.length;
  std::vector<double> latest = LatestStarts(input, ts);
  StepSimulation sim;
  constexpr int kFeedbackRounds = 8;
  for (int round = 0; round < kFeedbackRounds; ++round) {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i].kind != TransferKind::kLoad) continue;
      ts[i].issue_at =
          IssueAt(input, ts[i].access, latest[i], max_back[ts[i].access]);
    }
    sim = SimulateStep(input, ts);
    bool moved = false;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (sim.wait_seconds[i] <= 0) continue;
      const uint32_t before = ts[i].issue_at;
      latest[i] -= sim.wait_seconds[i];
      moved |= IssueAt(input, ts[i].access, latest[i],
                       max_back[ts[i].access]) != before;
    }
    if (!moved) break;
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    ts[i].start_seconds = ts[i].kind == TransferKind::kLoad
                              ? latest[i]
                              : input.accesses[ts[i].issue_at].at_seconds;
  }
  SortByIssue(n, ts);
  plan->transfers = std::move(ts);
  plan->predicted_seconds = sim.seconds;
  plan->predicted_stalls = sim.stalls;
  plan->predicted_stall_seconds = sim.stall_seconds;
}

}  // namespace strata
