// block_io.cc: BlockIo's default RunInOrder, for engines that cannot hand a
// request over before the whole batch is done.
#include "tiers/nvme/block_io.h"

namespace strata {

absl::Status BlockIo::RunInOrder(absl::Span<const IoRequest> requests,
                                 OnDone on_done) {
  const absl::Status status = Run(requests);
  if (!status.ok()) return status;
  for (size_t i = 0; i < requests.size(); ++i) {
    const absl::Status done = on_done(i);
    if (!done.ok()) return done;
  }
  return absl::OkStatus();
}

}  // namespace strata
