// stats.h: counters a Store reports through Store::GetStats(). A snapshot;
// values are cumulative since Open unless named current or peak.
#ifndef STRATA_STATS_H_
#define STRATA_STATS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

struct TierStats {
  uint64_t capacity_bytes = 0;   // budget reserved at Open
  uint64_t used_bytes = 0;       // current, allocation-rounded
  uint64_t peak_used_bytes = 0;  // high-water mark of used_bytes
  uint64_t leased_bytes = 0;     // current bytes under a lease
  uint64_t allocations = 0;      // extents allocated
  uint64_t frees = 0;            // extents freed
  uint64_t evictions = 0;        // copies removed to make room or by Evict
  // Times idle copies were moved within the tier to join its free space
  // into one range for a copy (fragmentation), and the bytes they moved.
  uint64_t compactions = 0;
  uint64_t relocated_bytes = 0;
};

// The links bytes move over. H2D/D2H: host<->device. NVMe read/write:
// NVMe->host-or-device and host-or-device->NVMe.
enum class Link : uint8_t { kH2D = 0, kD2H = 1, kNvmeRead = 2, kNvmeWrite = 3 };
inline constexpr int kNumLinks = 4;
std::string_view LinkName(
    Link link);  // "h2d", "d2h", "nvme_read", "nvme_write"

struct LinkStats {
  uint64_t bytes = 0;       // logical tensor bytes moved
  uint64_t transfers = 0;   // completed transfers
  uint64_t failures = 0;    // transfers that failed (data left intact)
  double busy_seconds = 0;  // wall time transfers on this link took, summed
  // Wall time with at least one transfer in flight on this link: with
  // several in flight at once, less than busy_seconds.
  double active_seconds = 0;
  double gbps() const {  // achieved GB/s (1e9 bytes) while active
    const double s = active_seconds > 0 ? active_seconds : busy_seconds;
    return s > 0 ? bytes / s / 1e9 : 0;
  }
};

struct PrefetchStats {
  uint64_t issued = 0;  // Prefetch hints accepted
  uint64_t hit = 0;     // prefetched copy was ready at acquire
  uint64_t late = 0;    // prefetched copy was still loading at acquire
  uint64_t wasted = 0;  // prefetched copy evicted before any acquire
  // Prefetches that ended in an error, whatever its code (a transfer error,
  // a full disk). A prefetch the tier had no room for (every copy there
  // leased, pinned or needed sooner) is skipped instead and not counted here.
  uint64_t failed = 0;
};

// How well the learned access trace predicted the acquires.
struct SchedulerStats {
  uint64_t steps = 0;      // steps ended (BeginStep/EndStep or detected)
  uint64_t accesses = 0;   // acquires observed
  uint64_t hits = 0;       // acquire was the predicted next one
  uint64_t resyncs = 0;    // found further ahead in the trace (a skip)
  uint64_t misses = 0;     // not predicted at all
  uint64_t rerecords = 0;  // traces replaced after a step diverged
  // The fewest bytes a step must read from and write to NVMe at these
  // budgets, whatever the schedule (scheduler/nvme_floor.h: live contents
  // that cannot all stay above NVMe, evicted where that costs least), for
  // the step shape learned that needs the most (a training step's, where
  // evaluation steps hold less); 0 without NVMe or before a step is
  // learned. Set them beside the NVMe bytes per step.
  uint64_t nvme_read_floor_bytes = 0;
  uint64_t nvme_write_floor_bytes = 0;
  // The residency plan (SchedulerOptions::planned) of the largest step
  // shape planned; all 0 before one is made. Per step: the bytes it puts
  // on each link (Link order), its lower bound on the step and the step
  // time it predicts (seconds).
  uint64_t plans = 0;           // plans made, re-plans included
  double planning_seconds = 0;  // time spent making them
  std::array<uint64_t, kNumLinks> planned_link_bytes{};
  double plan_bound_seconds = 0;
  double plan_predicted_seconds = 0;
};

// Unified-memory mode (DeviceOptions::memory == kUnified): how device
// residency was made. Bytes the hints and faults move count on the H2D/D2H
// links.
struct UnifiedStats {
  uint64_t prefetches = 0;   // hints that moved a tensor to the device
  uint64_t evictions = 0;    // hints that moved a tensor back to the host
  uint64_t discards = 0;     // dead contents dropped or overwritten with no
                             // byte crossing the link
  uint64_t read_mostly = 0;  // tensors advised read-mostly
  // Device acquires that found the tensor not resident: served on demand at
  // link speed (a prefetch with hints, page faults without).
  uint64_t faults = 0;
  uint64_t fault_bytes = 0;
};

struct Stats {
  std::array<TierStats, 3> tiers;          // indexed by Tier
  std::array<LinkStats, kNumLinks> links;  // indexed by Link
  PrefetchStats prefetch;
  SchedulerStats scheduler;
  uint64_t acquires = 0;
  uint64_t write_backs = 0;  // dirty copies written to a lower tier
  double stall_seconds = 0;  // time Acquire calls waited for data
  // Time store calls spent making room on a full tier: writing a dirty
  // victim back (to NVMe, or device -> host), waiting for write-backs or
  // loads in flight to free space (unified memory: ending a residency).
  // On an acquire's path it is part of stall_seconds: the stall a copy's
  // eviction cost rather than its own load.
  double room_seconds = 0;
  // Acquires that waited for or made a transfer; the rest found their data
  // in place (acquires - stalled_acquires = hits, prefetched or resident).
  uint64_t stalled_acquires = 0;
  // Device copies whose memory was freed (evicted, dropped, destroyed) while
  // kernels of their last lease could still be running (its release event
  // had not happened): the store waited for them before reusing the memory.
  uint64_t device_reader_waits = 0;
  // Device acquires that returned before their host -> device copy had
  // happened (stream-ordered: the lease's stream waits for the copy, the
  // CPU does not), and of those, the copies still in flight now. On the
  // simulated device copies are CPU work, done before the acquire returns.
  uint64_t queued_loads = 0;
  uint64_t queued_loads_in_flight = 0;
  // NVMe reads whose checksum did not match, after the one re-read below.
  uint64_t checksum_failures = 0;
  // NVMe reads whose checksum did not match and that were read once more
  // (a bit flipped on the way, not on the disk, is then survived).
  uint64_t checksum_rereads = 0;
  // NVMe requests run again after a transient error (EIO, EAGAIN, short
  // I/O); the run goes on unless one fails on every attempt.
  uint64_t io_retries = 0;
  uint64_t tensors = 0;  // current live tensors
  UnifiedStats unified;
  std::string device_backend;  // "cuda:<name>" or "simulated"
  // "copies", "unified" or "unified-no-hints" (DeviceOptions::memory)
  std::string device_memory;
  std::string io_engine;  // "io_uring", "thread-pool" or "none"
};

}  // namespace strata

#endif  // STRATA_STATS_H_
