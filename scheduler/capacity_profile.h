// capacity_profile.h: CapacityProfile, the bytes one tier holds at each
// position of a cyclic step, with range add and range max in O(log n)
// (a segment tree with lazy addition), for the residency planner's "does
// this copy fit over this interval" queries.
//
// Intervals are cyclic: [from, to) with from > to wraps past the step's end;
// from == to is empty.
//
// Thread safety: none; a value owned by one planning call.
#ifndef STRATA_SCHEDULER_CAPACITY_PROFILE_H_
#define STRATA_SCHEDULER_CAPACITY_PROFILE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata {

class CapacityProfile {
 public:
  // A profile of `positions` positions, all 0.
  explicit CapacityProfile(size_t positions);

  size_t positions() const { return n_; }

  // Adds `bytes` (negative: removes) at every position of [from, to).
  void Add(size_t from, size_t to, int64_t bytes);
  // Adds `bytes` at every position.
  void AddAll(int64_t bytes) { AddLinear(0, n_, bytes); }

  // The most bytes at any position of [from, to); 0 when empty.
  int64_t Max(size_t from, size_t to) const;
  // The most bytes at any position; 0 for a profile of no positions.
  int64_t Max() const { return n_ == 0 ? 0 : MaxLinear(0, n_); }
  // The bytes at `position`.
  int64_t At(size_t position) const {
    return MaxLinear(position, position + 1);
  }
  // A position holding Max(from, to) (the first, cyclically from `from`);
  // `from` when the interval is empty.
  size_t ArgMax(size_t from, size_t to) const;

 private:
  void AddLinear(size_t from, size_t to, int64_t bytes);
  int64_t MaxLinear(size_t from, size_t to) const;
  void Update(size_t node, size_t lo, size_t hi, size_t from, size_t to,
              int64_t bytes);
  int64_t Query(size_t node, size_t lo, size_t hi, size_t from,
                size_t to) const;
  size_t FindFirst(size_t node, size_t lo, size_t hi, size_t from, size_t to,
                   int64_t value, int64_t above) const;

  size_t n_;
  std::vector<int64_t> max_;  // max over the node's range, its own adds in
  std::vector<int64_t> add_;  // added to the node's whole range
};

}  // namespace strata

#endif  // STRATA_SCHEDULER_CAPACITY_PROFILE_H_
