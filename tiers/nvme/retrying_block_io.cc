// retrying_block_io.cc: bounded retries of transient block-I/O errors (see
// retrying_block_io.h).
#include "tiers/nvme/retrying_block_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace strata {

RetryingBlockIo::RetryingBlockIo(std::unique_ptr<BlockIo> inner,
                                 const RetryPolicy& policy)
    : inner_(std::move(inner)), policy_(policy) {}

absl::Status RetryingBlockIo::Run(absl::Span<const IoRequest> requests) {
  absl::Status status = inner_->Run(requests);
  if (!absl::IsUnavailable(status) || policy_.attempts <= 1) return status;
  // Which request failed is not known: each runs again on its own, so one
  // bad block does not make the whole batch fail again with it.
  for (const IoRequest& r : requests) {
    absl::Status one = RetryOne(r, status);
    if (!one.ok()) return one;
  }
  return absl::OkStatus();
}

absl::Status RetryingBlockIo::RunInOrder(absl::Span<const IoRequest> requests,
                                         OnDone on_done) {
  size_t handed = 0;     // requests on_done has taken
  absl::Status refused;  // on_done's own error: never retried
  const absl::Status status =
      inner_->RunInOrder(requests, [&](size_t i) -> absl::Status {
        refused = on_done(i);
        if (refused.ok()) ++handed;
        return refused;
      });
  if (!refused.ok()) return refused;
  if (!absl::IsUnavailable(status) || policy_.attempts <= 1) return status;
  for (size_t i = handed; i < requests.size(); ++i) {
    absl::Status one = RetryOne(requests[i], status);
    if (one.ok()) one = on_done(i);
    if (!one.ok()) return one;
  }
  return absl::OkStatus();
}

// Runs `request` up to attempts - 1 more times, backing off between tries;
// `last` is the batch's error, returned (annotated) if every try fails.
absl::Status RetryingBlockIo::RetryOne(const IoRequest& request,
                                       absl::Status last) {
  absl::Duration backoff = absl::Seconds(policy_.backoff_seconds);
  for (uint32_t attempt = 2; attempt <= policy_.attempts; ++attempt) {
    absl::SleepFor(backoff);
    backoff *= 2;
    retries_.fetch_add(1, std::memory_order_relaxed);
    last = inner_->Run(absl::MakeConstSpan(&request, 1));
    if (last.ok()) return last;
    if (!absl::IsUnavailable(last)) return last;  // not transient after all
  }
  return absl::Status(
      last.code(),
      absl::StrCat(last.message(), " (still failing after ", policy_.attempts,
                   " attempts with backoff: the disk is failing, not "
                   "flaky)"));
}

}  // namespace strata
