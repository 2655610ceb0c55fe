// capacity_profile.cc: CapacityProfile as a segment tree whose nodes keep
// the max of their range and the bytes added to all of it (no push-down:
// a query adds the pending additions on its way down).
#include "scheduler/capacity_profile.h"

#include <algorithm>
#include <limits>

namespace strata {
namespace {
constexpr int64_t kNone = std::numeric_limits<int64_t>::min() / 4;
}  // namespace

CapacityProfile::CapacityProfile(size_t positions)
    : n_(positions),
      max_(4 * std::max<size_t>(positions, 1), 0),
      add_(max_.size(), 0) {}

void CapacityProfile::Add(size_t from, size_t to, int64_t bytes) {
  if (from < to) {
    AddLinear(from, to, bytes);
  } else if (from > to) {
    AddLinear(from, n_, bytes);
    AddLinear(0, to, bytes);
  }
}

int64_t CapacityProfile::Max(size_t from, size_t to) const {
  if (from < to) return MaxLinear(from, to);
  if (from > to) return std::max(MaxLinear(from, n_), MaxLinear(0, to));
  return 0;
}

size_t CapacityProfile::ArgMax(size_t from, size_t to) const {
  if (from == to || n_ == 0) return from;
  const int64_t value = Max(from, to);
  const size_t end = from < to ? to : n_;
  const size_t found = FindFirst(1, 0, n_, from, end, value, 0);
  if (found < end) return found;
  return FindFirst(1, 0, n_, 0, to, value, 0);
}

void CapacityProfile::AddLinear(size_t from, size_t to, int64_t bytes) {
  to = std::min(to, n_);
  if (from < to) Update(1, 0, n_, from, to, bytes);
}

int64_t CapacityProfile::MaxLinear(size_t from, size_t to) const {
  to = std::min(to, n_);
  return from < to ? Query(1, 0, n_, from, to) : 0;
}

void CapacityProfile::Update(size_t node, size_t lo, size_t hi, size_t from,
                             size_t to, int64_t bytes) {
  if (to <= lo || hi <= from) return;
  if (from <= lo && hi <= to) {
    add_[node] += bytes;
    max_[node] += bytes;
    return;
  }
  const size_t mid = lo + (hi - lo) / 2;
  Update(2 * node, lo, mid, from, to, bytes);
  Update(2 * node + 1, mid, hi, from, to, bytes);
  max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
}

int64_t CapacityProfile::Query(size_t node, size_t lo, size_t hi, size_t from,
                               size_t to) const {
  if (to <= lo || hi <= from) return kNone;
  if (from <= lo && hi <= to) return max_[node];
  const size_t mid = lo + (hi - lo) / 2;
  return add_[node] + std::max(Query(2 * node, lo, mid, from, to),
                               Query(2 * node + 1, mid, hi, from, to));
}

// The first position in [from, to) whose bytes equal `value`; `to` when
// none. `above` is what the ancestors add.
size_t CapacityProfile::FindFirst(size_t node, size_t lo, size_t hi,
                                  size_t from, size_t to, int64_t value,
                                  int64_t above) const {
  if (to <= lo || hi <= from || max_[node] + above < value) return to;
  if (hi - lo == 1) return lo;
  const size_t mid = lo + (hi - lo) / 2;
  const int64_t down = above + add_[node];
  const size_t left = FindFirst(2 * node, lo, mid, from, to, value, down);
  if (left < to) return left;
  return FindFirst(2 * node + 1, mid, hi, from, to, value, down);
}

}  // namespace strata
