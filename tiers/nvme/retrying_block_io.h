// retrying_block_io.h: RetryingBlockIo, the BlockIo wrapper that makes a
// transient I/O error (EIO, EAGAIN past the engine's own retries, a short
// read or write: every status that io_error.h maps to Unavailable) invisible
// to the store, so a run on a flaky disk goes on.
//
// Policy: a batch runs once as a whole. If it fails with Unavailable, each
// of its requests runs again on its own (a read or a write of the same bytes
// at the same offset is idempotent, and the engine does not say which
// request failed), up to `attempts` tries in all per request, sleeping
// `backoff_seconds` before the first retry and twice as long before each
// later one (1, 2, 4 ms by default: a bounded wait, then the error). Any
// other error (a full disk, a bad descriptor, end of file) returns at once:
// retrying would not change it. A request that still fails after its last
// attempt returns its status, saying how many attempts were made.
//
// Thread safety: thread-safe, as the wrapped engine.
#ifndef STRATA_TIERS_NVME_RETRYING_BLOCK_IO_H_
#define STRATA_TIERS_NVME_RETRYING_BLOCK_IO_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "tiers/nvme/block_io.h"

namespace strata {

struct RetryPolicy {
  // Tries per request in all, >= 1 (1: no retry). Default: 4.
  uint32_t attempts = 4;
  // Sleep before the first retry, doubled before each later one.
  // Default: 0.001 s.
  double backoff_seconds = 0.001;
};

class RetryingBlockIo final : public BlockIo {
 public:
  // Wraps `inner` (owned).
  RetryingBlockIo(std::unique_ptr<BlockIo> inner, const RetryPolicy& policy);
  RetryingBlockIo(const RetryingBlockIo&) = delete;
  RetryingBlockIo& operator=(const RetryingBlockIo&) = delete;

  // The wrapped engine's name: retrying is not an engine of its own.
  std::string_view engine_name() const override {
    return inner_->engine_name();
  }
  // Runs `requests`, retrying transient failures as the policy says.
  absl::Status Run(absl::Span<const IoRequest> requests) override;
  // RunInOrder, with the same retries: after a transient failure the
  // requests not yet handed to `on_done` run again one by one, each handed
  // over as it succeeds, so `on_done` still sees every request once, in
  // order.
  absl::Status RunInOrder(absl::Span<const IoRequest> requests,
                          OnDone on_done) override;

  // Requests run again after a transient failure, so far.
  uint64_t retries() const { return retries_.load(std::memory_order_relaxed); }

 private:
  absl::Status RetryOne(const IoRequest& request, absl::Status last);

  // Constant after construction.
  const std::unique_ptr<BlockIo> inner_;
  const RetryPolicy policy_;

  std::atomic<uint64_t> retries_{0};
};

}  // namespace strata

#endif  // STRATA_TIERS_NVME_RETRYING_BLOCK_IO_H_
