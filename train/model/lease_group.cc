// lease_group.cc: all-or-nothing leases for one operation (see
// lease_group.h).
#include "train/model/lease_group.h"

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
    if (!r.lease.valid()) continue;
    const absl::Status released = r.lease.Release(stream_);
    // A written member now holds what the operation produced.
    if (released.ok() && meter_ != nullptr && r.access != Access::kRead) {
      meter_->Produced(r.id);
    }
    status.Update(released);
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
  // Contents kept first, overwrites last (a failure then costs them least);
  // largest first within each: they need the longest free ranges.
  std::vector<size_t> order(requests_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Request& x = requests_[a];
    const Request& y = requests_[b];
    const bool xo = x.access == Access::kOverwrite;
    const bool yo = y.access == Access::kOverwrite;
    if (xo != yo) return yo;
    return x.bytes > y.bytes;
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

// Moves copies one tier down, so the retry places the group into a tier
// holding nothing unleased of the caller's. Copies on their home tier stay:
// they cannot be evicted there (and their space was reserved at Create).
void LeaseGroup::EvictFromTier() {
  if (tier_ == Tier::kNvme) return;
  const Tier below = static_cast<Tier>(static_cast<int>(tier_) + 1);
  auto evict = [&](TensorId id) {
    absl::StatusOr<TensorSpec> spec = store_->GetSpec(id);
    if (!spec.ok() || spec->home <= tier_) return;
    // FailedPrecondition for a copy someone leases: it stays, as it must.
    // When the tier below has no room for a dirty copy, write it home.
    if (!store_->Evict(id, std::min(below, spec->home)).ok()) {
      store_->Evict(id, spec->home).IgnoreError();
    }
  };
  if (retry_evictions_ != nullptr) {
    for (TensorId id : *retry_evictions_) evict(id);
  }
  for (const Request& r : requests_) evict(r.id);
}

absl::Status LeaseGroup::Acquire() {
  absl::Status status = AcquireOnce();
  for (int attempt = 1; attempt < kAttempts &&
                        status.code() == absl::StatusCode::kResourceExhausted;
       ++attempt) {
    g_retries.fetch_add(1);
    store_->PausePrefetch(true);
    EvictFromTier();
    status = AcquireOnce();
    store_->PausePrefetch(false);
  }
  return status;
}

}  // namespace strata::train
