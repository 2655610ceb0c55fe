// metrics.h: the summary numbers a training report derives from a run —
// shared by `strata train` and bench/train_bench so both mean the same thing.
#ifndef STRATA_TRAIN_RUN_METRICS_H_
#define STRATA_TRAIN_RUN_METRICS_H_

#include <vector>

#include "nlohmann/json.hpp"
#include "strata/stats.h"

namespace strata::train {

// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

// Of the acquires that needed bytes moved, the fraction a prefetch had
// already brought: hit / (hit + stalled acquires); 1 when nothing ever had
// to move.
double PrefetchHitRate(const Stats& stats);

// The residency plan's figures in `s` as a report's "plan" object (per
// step: planned bytes per link, the NVMe write floor, the plan's lower
// bound and predicted step time; plans made and seconds spent making
// them); null when no plan was made.
nlohmann::json PlanJson(const SchedulerStats& s);

// The acquires' stall seconds by cause: "room" (making room on a full tier:
// writing a victim back, waiting for write-backs or loads in flight to
// free space) and "load" (waiting for the copy's own transfer), summing to
// Stats::stall_seconds.
nlohmann::json StallJson(const Stats& s);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_METRICS_H_
