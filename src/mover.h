// mover.h: Mover, the store's transfer engine: moves a tensor's bytes
// between two tier extents and keeps per-link counters.
//
// Paths: host<->device through the device backend's copy engines;
// host<->NVMe straight from the pinned host arena through NvmeTier (the host
// extent is 4 KiB-rounded, so the O_DIRECT length always fits);
// NVMe<->device pipelined through BouncePool chunk pairs (chunk k+1 is read
// while chunk k is copied). Every NVMe write computes an XXH3-64 checksum of
// the logical bytes; every NVMe read verifies it before the destination can
// be marked valid, reads once more on a mismatch (while the NVMe tier
// retries, NvmeOptions::io_attempts > 1), and returns DataLoss when the
// second read does not match either. When the host tier is managed memory
// (unified-memory mode), host<->NVMe runs through the bounce chunks too: the
// driver migrates managed pages, so they cannot be pinned for O_DIRECT.
// Unified memory also moves bytes by hints (Migrate, ServeFault), counted on
// the H2D/D2H links like copies.
//
// Asynchronous use (MoveAsync, RunAsync): the tier interfaces are blocking
// calls, so a request runs on one of the Mover's transfer threads and its
// completion is called there; the caller's thread returns at once.
//
// Thread safety: Move may be called concurrently; the caller guarantees the
// source is not modified and the destination not read meanwhile (for an
// asynchronous request, until its completion has run).
#ifndef STRATA_SRC_MOVER_H_
#define STRATA_SRC_MOVER_H_

#include <array>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/sync.h"
#include "src/bounce_pool.h"
#include "src/extent_allocator.h"
#include "src/timeline.h"
#include "strata/stats.h"
#include "strata/tensor.h"
#include "tiers/device/device_backend.h"
#include "tiers/nvme/nvme_tier.h"

namespace strata {

// A copy's location: a tier and an extent on it.
struct Place {
  Tier tier;
  Extent extent;
};

// One transfer for MoveAsync: Move's arguments, owned.
struct MoveRequest {
  Place src;
  Place dst;
  uint64_t bytes = 0;
  uint64_t checksum = 0;  // in for NVMe sources, out for NVMe destinations
  std::shared_ptr<DeviceEvent> after;  // device sources: wait for it first
  std::string label;
};

// A host -> device copy queued on the device's copy stream
// (Mover::StartHostToDevice) that may not have happened yet.
struct QueuedCopy {
  std::shared_ptr<DeviceEvent> event;  // happens once the bytes are there
  absl::Time start;
  uint64_t bytes = 0;
  std::string label;
};

class Mover {
 public:
  // All pointers must outlive the Mover; `nvme` and `bounce` may be null when
  // there is no NVMe tier.
  // `timeline` (may be null) receives a span per transfer.
  // `host_managed`: the host arena is managed memory (unified mode).
  // `transfer_threads` (>= 1) run asynchronous requests.
  Mover(DeviceBackend* device, std::byte* device_base, std::byte* host_base,
        NvmeTier* nvme, BouncePool* bounce, Timeline* timeline = nullptr,
        bool host_managed = false, int transfer_threads = 1);
  // Waits for the asynchronous requests still running.
  ~Mover();

  // Copies `bytes` from extent `from` to extent `to` of the same tier
  // (device or host; they do not overlap): a copy moved by compaction
  // (src/compaction.h). Crosses no link. On error `to` is undefined and
  // `from` untouched.
  absl::Status Relocate(Tier tier, const Extent& from, const Extent& to,
                        uint64_t bytes, std::string_view label);

  // Copies the first `bytes` of `src` to `dst` (different tiers). When the
  // source is NVMe, `*checksum` is the expected XXH3-64; when the destination
  // is NVMe, `*checksum` receives it. `after` (device sources) is the event the
  // copy must wait for. On error the destination is undefined and the source
  // untouched.
  // `label` names the transfer on the timeline.
  absl::Status Move(const Place& src, const Place& dst, uint64_t bytes,
                    uint64_t* checksum, DeviceEvent* after,
                    std::string_view label = "");

  // Move, asynchronously: returns at once; the transfer runs on a transfer
  // thread, which then calls `done` with Move's status and the request (its
  // checksum set as Move sets *checksum). Requests beyond the transfer
  // threads wait their turn, in order.
  using MoveDone = std::function<void(absl::Status, const MoveRequest&)>;
  void MoveAsync(MoveRequest request, MoveDone done);
  // Runs `work` (blocking transfers: Migrate, ServeFault, ...) on a transfer
  // thread, then `done` there with its status; returns at once.
  void RunAsync(std::function<absl::Status()> work,
                std::function<void(absl::Status)> done);

  // Unified memory: migrates `range` to `to` by a prefetch hint (discard:
  // its contents are dead and nothing crosses), after `after`; returns when
  // it is there. Counted on H2D (to the device) or D2H (to the host).
  absl::Status Migrate(const ManagedRange& range, MemLocation to, bool discard,
                       DeviceEvent* after, std::string_view label);
  // Unified memory without hints: an access from `to` faults `range` over.
  absl::Status ServeFault(const ManagedRange& range, MemLocation to,
                          std::string_view label);

  // A range copy between a leased device copy and caller host memory
  // (Lease::CopyOut/CopyIn): kD2H or kH2D, after `after` (may be null);
  // counted on its link and drawn on the timeline as a transfer is.
  absl::Status CopyLeased(CopyKind kind, void* dst, const void* src,
                          uint64_t bytes, DeviceEvent* after,
                          std::string_view label);

  // Queues `bytes` from host `src` to device `dst` on the device's copy
  // stream and returns without waiting (DeviceBackend::CopyAsync): `src`
  // must stay unchanged, and `dst` be read only after the event, until the
  // event has happened; then call EndQueued. An error: nothing is queued
  // (counted as a failed H2D).
  absl::StatusOr<QueuedCopy> StartHostToDevice(const Place& src,
                                               const Place& dst, uint64_t bytes,
                                               std::string_view label);
  // Counts a copy StartHostToDevice queued, once its event has happened
  // (`ok`: without an error), and draws it on the timeline.
  void EndQueued(const QueuedCopy& copy, bool ok);

  // Fills `bytes` at `place` (device or host) with zeros.
  absl::Status Zero(const Place& place, uint64_t bytes);

  // Pointer to an extent on the device or host tier.
  std::byte* Pointer(const Place& place) const;

  // Adds link counters and checksum failures to `stats`.
  void AddTo(Stats* stats) const;
  // Each link's throughput so far (LinkStats::gbps, GB/s); 0 before any
  // transfer on it ended.
  std::array<double, kNumLinks> Gbps() const;

 private:
  absl::Status Dispatch(const Place& src, const Place& dst, uint64_t bytes,
                        uint64_t* checksum, DeviceEvent* after);
  absl::Status NvmeToHost(const Place& src, const Place& dst, uint64_t bytes,
                          uint64_t checksum);
  absl::Status HostToNvme(const Place& src, const Place& dst, uint64_t bytes,
                          uint64_t* checksum);
  // NVMe -> pinned host memory `buf` in pieces, each hashed while the next
  // is read; DataLoss on a checksum mismatch.
  absl::Status ReadVerifying(const Place& src, std::byte* buf, uint64_t bytes,
                             uint64_t checksum);
  absl::Status NvmeToDevice(const Place& src, const Place& dst, uint64_t bytes,
                            uint64_t checksum);
  absl::Status DeviceToNvme(const Place& src, const Place& dst, uint64_t bytes,
                            uint64_t* checksum, DeviceEvent* after);
  // Copies one chunk between a bounce chunk and a tier (`first`: the
  // transfer's first chunk).
  using ChunkCopy = std::function<absl::Status(
      std::byte* dst, const std::byte* src, uint64_t n, bool first)>;
  // NVMe -> `dst` through bounce chunks: chunk k+1 is read while chunk k is
  // hashed and copied out with `copy`.
  absl::Status StagedRead(const Place& src, std::byte* dst, uint64_t bytes,
                          uint64_t checksum, const ChunkCopy& copy);
  // `src` -> NVMe through bounce chunks: chunk k+1 is copied in with `copy`
  // while chunk k is written.
  absl::Status StagedWrite(const std::byte* src, const Place& dst,
                           uint64_t bytes, uint64_t* checksum,
                           const ChunkCopy& copy);
  void Span(std::string_view label, std::string_view lane, absl::Time start,
            bool ok);
  // DataLoss naming the NVMe address (counted by CountFailure).
  absl::Status ChecksumMismatch(const Place& src, uint64_t bytes);
  // Runs the NVMe read `read`; on a checksum mismatch, when the tier
  // retries, runs it once more. Counts rereads and the failures that stay.
  absl::Status RereadOnMismatch(const std::function<absl::Status()>& read);
  // Counts `status` in checksum_failures_ when it is DataLoss; returns it.
  absl::Status CountFailure(absl::Status status);
  void Count(Link link, uint64_t bytes, double seconds, bool ok);
  // Whether a transfer src -> dst uses `link` (NVMe <-> device: two).
  static bool Uses(Link link, Tier src, Tier dst);
  // A Move's start and end on its links, for LinkStats::active_seconds.
  void Enter(Tier src, Tier dst, absl::Time now);
  void Leave(Tier src, Tier dst, absl::Time now);

  DeviceBackend* const device_;
  std::byte* const device_base_;
  std::byte* const host_base_;
  NvmeTier* const nvme_;
  BouncePool* const bounce_;
  Timeline* const timeline_;
  const bool host_managed_;
  // Runs the second stage of NVMe<->device pipelines.
  boost::asio::thread_pool pipeline_{4};
  // Runs MoveAsync and RunAsync requests (which may use pipeline_).
  boost::asio::thread_pool transfers_;

  mutable Mutex mu_;
  std::array<LinkStats, kNumLinks> links_ ABSL_GUARDED_BY(mu_);
  std::array<int, kNumLinks> in_flight_ ABSL_GUARDED_BY(mu_) = {};
  std::array<absl::Time, kNumLinks> active_since_ ABSL_GUARDED_BY(mu_) = {};
  uint64_t checksum_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checksum_rereads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace strata

#endif  // STRATA_SRC_MOVER_H_
