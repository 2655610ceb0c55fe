// metrics.h: the summary numbers a training report derives from a run —
// shared by `strata train` and bench/train_bench so both mean the same thing.
#ifndef STRATA_TRAIN_RUN_METRICS_H_
#define STRATA_TRAIN_RUN_METRICS_H_

#include <vector>

#include "strata/stats.h"

namespace strata::train {

// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

// Of the acquires that needed bytes moved, the fraction a prefetch had
// already brought: hit / (hit + stalled acquires); 1 when nothing ever had
// to move.
double PrefetchHitRate(const Stats& stats);

}  // namespace strata::train

#endif  // STRATA_TRAIN_RUN_METRICS_H_
