// lease_group.cc: all-or-nothing leases for one operation (see
// lease_group.h).
#include "train/lease_group.h"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "strata/status.h"

namespace strata::train {
namespace {
std::atomic<uint64_t> g_retries{0};
}  // namespace

uint64_t LeaseGroup::retries() { return g_retries.load(); }

int LeaseGroup::Add(TensorId id, Access access) {
  requests_.push_back({.id = id, .access = access});
  return static_cast<int>(requests_.size()) - 1;
}

float* LeaseGroup::data(int index) const {
  return static_cast<float*>(requests_[index].lease.data());
}

absl::Status LeaseGroup::Release() {
  absl::Status status;
  for (Request& r : requests_) {
    if (r.lease.valid()) status.Update(r.lease.Release(stream_));
  }
  return status;
}

absl::Status LeaseGroup::AcquireOnce() {
  for (Request& r : requests_) {
    if (r.bytes == 0) {
      STRATA_ASSIGN_OR_RETURN(TensorSpec spec, store_->GetSpec(r.id));
      r.bytes = spec.size_bytes;
    }
  }
  // Largest first: they need the longest free ranges.
  std::vector<size_t> order(requests_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests_[a].bytes > requests_[b].bytes;
  });
  for (size_t i : order) {
    Request& r = requests_[i];
    absl::StatusOr<Lease> lease =
        store_->Acquire(r.id, tier_, r.access, stream_);
    if (!lease.ok()) {
      Release().IgnoreError();  // the acquire's error is the one to report
      return lease.status();
    }
    r.lease = *std::move(lease);
  }
  return absl::OkStatus();
}

// Moves the group's copies one tier down, so the retry places them into a
// tier holding nothing unleased. Copies on their home tier stay: they cannot
// be evicted there (and their space was reserved at Create).
void LeaseGroup::EvictFromTier() {
  const Tier below = static_cast<Tier>(static_cast<int>(tier_) + 1);
  for (const Request& r : requests_) {
    absl::StatusOr<TensorSpec> spec = store_->GetSpec(r.id);
    if (!spec.ok() || spec->home <= tier_ || tier_ == Tier::kNvme) continue;
    store_->Evict(r.id, std::min(below, spec->home)).IgnoreError();
  }
}

absl::Status LeaseGroup::Acquire() {
  absl::Status status = AcquireOnce();
  if (status.code() != absl::StatusCode::kResourceExhausted) return status;
  g_retries.fetch_add(1);
  EvictFromTier();
  return AcquireOnce();
}

}  // namespace strata::train
