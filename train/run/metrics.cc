// metrics.cc: see metrics.h.
#include "train/run/metrics.h"

#include <algorithm>

namespace strata::train {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double PrefetchHitRate(const Stats& s) {
  const double needed = double(s.prefetch.hit) + s.stalled_acquires;
  return needed > 0 ? s.prefetch.hit / needed : 1.0;
}

}  // namespace strata::train
