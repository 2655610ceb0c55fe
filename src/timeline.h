// timeline.h: Timeline, a record of every transfer and lease span, written as
// Chrome trace-event JSON (open it in Perfetto or chrome://tracing).
//
// Each span lands on a named track: one per link ("h2d", "nvme_read", ...)
// and one per tier for leases ("lease device", ...), shown as threads of one
// process. Times are microseconds since the timeline started.
//
// Thread safety: thread-safe.
#ifndef STRATA_SRC_TIMELINE_H_
#define STRATA_SRC_TIMELINE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace strata {

class Timeline {
 public:
  Timeline();
  // Adds a span [start, end) named `name` on `track`.
  void Record(std::string name, std::string track, absl::Time start,
              absl::Time end);
  // Writes {"traceEvents": [...]} to `path`. PermissionDenied/NotFound/...
  // when the file cannot be written.
  absl::Status WriteChromeTrace(const std::string& path) const;
  size_t size() const;

 private:
  struct Span {
    std::string name;
    std::string track;
    double start_us;
    double duration_us;
  };
  const absl::Time origin_;
  mutable Mutex mu_;
  std::vector<Span> spans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_SRC_TIMELINE_H_
