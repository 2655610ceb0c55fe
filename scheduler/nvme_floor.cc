// nvme_floor.cc: NvmeReadFloorBytes, live bytes over a cyclic trace by a
// difference array.
#include "scheduler/nvme_floor.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace strata {

uint64_t NvmeReadFloorBytes(const Trace& trace, TensorBytes bytes_of,
                            uint64_t above_nvme_bytes) {
  const size_t n = trace.size();
  if (n == 0) return 0;
  // delta[p]: live bytes that start (+) or stop (-) counting at position p.
  std::vector<int64_t> delta(n + 1, 0);
  const auto add = [&](size_t from, size_t to, uint64_t bytes) {
    delta[from] += static_cast<int64_t>(bytes);  // positions from..to
    delta[to + 1] -= static_cast<int64_t>(bytes);
  };
  absl::flat_hash_set<TensorId> seen;
  for (const AccessEvent& event : trace.events()) {
    if (!seen.insert(event.id).second) continue;
    const uint64_t bytes = bytes_of(event.id);
    if (bytes == 0) continue;
    const absl::Span<const uint32_t> at = trace.Positions(event.id);
    for (size_t i = 0; i < at.size(); ++i) {
      // The gap after access i up to the next (the first, next step).
      const size_t next = i + 1 < at.size() ? at[i + 1] : at[0];
      if (trace[next].access == Access::kOverwrite) continue;
      if (next > at[i]) {
        add(at[i] + 1, next, bytes);
      } else {  // wraps: to the step's end, then from its start
        if (at[i] + 1 < n) add(at[i] + 1, n - 1, bytes);
        add(0, next, bytes);
      }
    }
  }
  int64_t live = 0, fullest = 0;
  for (size_t p = 0; p < n; ++p) {
    live += delta[p];
    fullest = std::max(fullest, live);
  }
  const auto peak = static_cast<uint64_t>(fullest);
  return peak > above_nvme_bytes ? peak - above_nvme_bytes : 0;
}

}  // namespace strata
