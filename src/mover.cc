#include "src/mover.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstring>
#include <future>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/xxh3.h"
#include "strata/status.h"

namespace strata {
namespace {

// Host -> NVMe writes from this size on checksum while the write runs: below
// it a thread handoff (~10 us) costs more than the hash it would hide
// (XXH3 runs at ~30 GB/s: 1 MiB in ~35 us).
constexpr uint64_t kOverlapChecksumBytes = 1 * kMiB;
// Host-bound reads of at least this many of those sizes are read in this many
// pieces, each hashed while the next is read (ReadVerifying).
constexpr uint64_t kPiecesPerRead = 4;

uint64_t RoundUpDirect(uint64_t bytes) {
  return (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment *
         kDirectIoAlignment;
}

// Streams the XXH3-64 of a tensor's bytes chunk by chunk.
class StreamingChecksum {
 public:
  StreamingChecksum() : state_(XXH3_createState()) {
    XXH3_64bits_reset(state_);
  }
  ~StreamingChecksum() { XXH3_freeState(state_); }
  void Update(const void* p, uint64_t n) { XXH3_64bits_update(state_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// Posts `fn` to `pool` and returns a future of its Status.
template <typename Fn>
std::future<absl::Status> Async(boost::asio::thread_pool& pool, Fn fn) {
  auto task =
      std::make_shared<std::packaged_task<absl::Status()>>(std::move(fn));
  std::future<absl::Status> result = task->get_future();
  boost::asio::post(pool, [task] { (*task)(); });
  return result;
}

// A staged transfer's chunk copy on the CPU (managed host memory).
absl::Status CpuCopy(std::byte* to, const std::byte* from, uint64_t n,
                     bool /*first*/) {
  std::memcpy(to, from, n);
  return absl::OkStatus();
}

// Waits for a pending stage, if any, and returns its Status.
absl::Status Drain(std::future<absl::Status>& pending) {
  return pending.valid() ? pending.get() : absl::OkStatus();
}

}  // namespace

Mover::Mover(DeviceBackend* device, std::byte* device_base,
             std::byte* host_base, NvmeTier* nvme, BouncePool* bounce,
             Timeline* timeline, bool host_managed, int transfer_threads)
    : device_(device),
      device_base_(device_base),
      host_base_(host_base),
      nvme_(nvme),
      bounce_(bounce),
      timeline_(timeline),
      host_managed_(host_managed),
      transfers_(static_cast<size_t>(std::max(1, transfer_threads))) {}

Mover::~Mover() {
  transfers_.join();  // before the pipeline its requests use
  pipeline_.join();
}

void Mover::MoveAsync(MoveRequest request, MoveDone done) {
  auto r = std::make_shared<MoveRequest>(std::move(request));
  boost::asio::post(transfers_, [this, r, done = std::move(done)] {
    absl::Status status =
        Move(r->src, r->dst, r->bytes, &r->checksum, r->after.get(), r->label);
    done(std::move(status), *r);
  });
}

void Mover::RunAsync(std::function<absl::Status()> work,
                     std::function<void(absl::Status)> done) {
  boost::asio::post(transfers_, [work = std::move(work),
                                 done = std::move(done)] { done(work()); });
}

std::byte* Mover::Pointer(const Place& place) const {
  std::byte* base = place.tier == Tier::kDevice ? device_base_ : host_base_;
  return base + place.extent.offset;
}

absl::Status Mover::Move(const Place& src, const Place& dst, uint64_t bytes,
                         uint64_t* checksum, DeviceEvent* after,
                         std::string_view label) {
  const absl::Time start = absl::Now();
  Enter(src.tier, dst.tier, start);
  absl::Status status = Dispatch(src, dst, bytes, checksum, after);
  Span(label,
       absl::StrFormat("%s -> %s", TierName(src.tier), TierName(dst.tier)),
       start, status.ok());
  const absl::Time end = absl::Now();
  const double seconds = absl::ToDoubleSeconds(end - start);
  for (int l = 0; l < kNumLinks; ++l) {
    if (Uses(Link(l), src.tier, dst.tier)) {
      Count(Link(l), bytes, seconds, status.ok());
    }
  }
  Leave(src.tier, dst.tier, end);
  return status;
}

absl::StatusOr<QueuedCopy> Mover::StartHostToDevice(const Place& src,
                                                    const Place& dst,
                                                    uint64_t bytes,
                                                    std::string_view label) {
  QueuedCopy copy{
      .start = absl::Now(), .bytes = bytes, .label = std::string(label)};
  Enter(Tier::kHost, Tier::kDevice, copy.start);
  absl::StatusOr<std::shared_ptr<DeviceEvent>> event =
      device_->CopyAsync(CopyKind::kH2D, Pointer(dst), Pointer(src), bytes);
  if (!event.ok()) {
    EndQueued(copy, /*ok=*/false);
    return event.status();
  }
  copy.event = *std::move(event);
  return copy;
}

void Mover::EndQueued(const QueuedCopy& copy, bool ok) {
  Span(copy.label, "host -> device", copy.start, ok);
  const absl::Time end = absl::Now();
  Count(Link::kH2D, copy.bytes, absl::ToDoubleSeconds(end - copy.start), ok);
  Leave(Tier::kHost, Tier::kDevice, end);
}

absl::Status Mover::CopyLeased(CopyKind kind, void* dst, const void* src,
                               uint64_t bytes, DeviceEvent* after,
                               std::string_view label) {
  const bool down = kind == CopyKind::kD2H;
  const Tier from = down ? Tier::kDevice : Tier::kHost;
  const Tier to = down ? Tier::kHost : Tier::kDevice;
  const absl::Time start = absl::Now();
  Enter(from, to, start);
  const absl::Status status = device_->Copy(kind, dst, src, bytes, after);
  Span(label, down ? "range device -> caller" : "range caller -> device", start,
       status.ok());
  const absl::Time end = absl::Now();
  Count(down ? Link::kD2H : Link::kH2D, bytes,
        absl::ToDoubleSeconds(end - start), status.ok());
  Leave(from, to, end);
  return status;
}

bool Mover::Uses(Link link, Tier src, Tier dst) {
  switch (link) {
    case Link::kNvmeRead:
      return src == Tier::kNvme;
    case Link::kNvmeWrite:
      return dst == Tier::kNvme;
    case Link::kH2D:
      return dst == Tier::kDevice;
    case Link::kD2H:
      return src == Tier::kDevice;
  }
  return false;
}

void Mover::Enter(Tier src, Tier dst, absl::Time now) {
  MutexLock lock(&mu_);
  for (int l = 0; l < kNumLinks; ++l) {
    if (Uses(Link(l), src, dst) && in_flight_[l]++ == 0) {
      active_since_[l] = now;
    }
  }
}

void Mover::Leave(Tier src, Tier dst, absl::Time now) {
  MutexLock lock(&mu_);
  for (int l = 0; l < kNumLinks; ++l) {
    if (Uses(Link(l), src, dst) && --in_flight_[l] == 0) {
      links_[l].active_seconds += absl::ToDoubleSeconds(now - active_since_[l]);
    }
  }
}

absl::Status Mover::Relocate(Tier tier, const Extent& from, const Extent& to,
                             uint64_t bytes, std::string_view label) {
  const absl::Time start = absl::Now();
  std::byte* dst = Pointer({tier, to});
  const std::byte* src = Pointer({tier, from});
  absl::Status status;
  if (tier == Tier::kDevice) {
    status = device_->Copy(CopyKind::kD2D, dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
  Span(label, absl::StrFormat("relocate %s", TierName(tier)), start,
       status.ok());
  return status;
}

absl::Status Mover::Dispatch(const Place& src, const Place& dst, uint64_t bytes,
                             uint64_t* checksum, DeviceEvent* after) {
  switch (static_cast<int>(src.tier) * kNumTiers + static_cast<int>(dst.tier)) {
    case 0 * kNumTiers + 1:  // device -> host
      return device_->Copy(CopyKind::kD2H, Pointer(dst), Pointer(src), bytes,
                           after);
    case 1 * kNumTiers + 0:  // host -> device
      return device_->Copy(CopyKind::kH2D, Pointer(dst), Pointer(src), bytes);
    case 2 * kNumTiers + 1:
      return NvmeToHost(src, dst, bytes, *checksum);
    case 1 * kNumTiers + 2:
      return HostToNvme(src, dst, bytes, checksum);
    case 2 * kNumTiers + 0:
      return NvmeToDevice(src, dst, bytes, *checksum);
    case 0 * kNumTiers + 2:
      return DeviceToNvme(src, dst, bytes, checksum, after);
  }
  return absl::InternalError(absl::StrFormat(
      "no transfer path %s -> %s", TierName(src.tier), TierName(dst.tier)));
}

absl::Status Mover::NvmeToHost(const Place& src, const Place& dst,
                               uint64_t bytes, uint64_t checksum) {
  std::byte* buf = Pointer(dst);
  if (host_managed_) {
    return RereadOnMismatch(
        [&] { return StagedRead(src, buf, bytes, checksum, CpuCopy); });
  }
  const auto read = [&] {
    if (bytes >= kPiecesPerRead * kOverlapChecksumBytes) {
      return ReadVerifying(src, buf, bytes, checksum);
    }
    STRATA_RETURN_IF_ERROR(
        nvme_->Read(src.extent.offset, buf, RoundUpDirect(bytes)));
    return XXH3_64bits(buf, bytes) == checksum ? absl::OkStatus()
                                               : ChecksumMismatch(src, bytes);
  };
  return RereadOnMismatch(read);
}

absl::Status Mover::ReadVerifying(const Place& src, std::byte* buf,
                                  uint64_t bytes, uint64_t checksum) {
  const uint64_t padded = RoundUpDirect(bytes);
  const uint64_t piece = RoundUpDirect(padded / kPiecesPerRead);
  const auto read_piece = [&](uint64_t at) {
    return Async(pipeline_,
                 [this, &src, buf, at, n = std::min(piece, padded - at)] {
                   return nvme_->Read(src.extent.offset + at, buf + at, n);
                 });
  };
  // Piece k is hashed while piece k + 1 is read; at most one read is in
  // flight when this returns early, and it is waited for first.
  StreamingChecksum sum;
  std::future<absl::Status> reading = read_piece(0);
  for (uint64_t at = 0; at < padded; at += piece) {
    STRATA_RETURN_IF_ERROR(reading.get());
    if (at + piece < padded) reading = read_piece(at + piece);
    if (at < bytes) sum.Update(buf + at, std::min(piece, bytes - at));
  }
  if (sum.Digest() != checksum) return ChecksumMismatch(src, bytes);
  return absl::OkStatus();
}

absl::Status Mover::HostToNvme(const Place& src, const Place& dst,
                               uint64_t bytes, uint64_t* checksum) {
  const std::byte* buf = Pointer(src);
  if (host_managed_) {
    return StagedWrite(buf, dst, bytes, checksum, CpuCopy);
  }
  if (bytes < kOverlapChecksumBytes) {
    *checksum = XXH3_64bits(buf, bytes);
    return nvme_->Write(dst.extent.offset, buf, RoundUpDirect(bytes));
  }
  // The write only reads the buffer, so the checksum runs beside it on this
  // thread instead of before it: max(write, hash), not their sum.
  std::future<absl::Status> writing = Async(pipeline_, [&] {
    return nvme_->Write(dst.extent.offset, buf, RoundUpDirect(bytes));
  });
  *checksum = XXH3_64bits(buf, bytes);
  return writing.get();
}

absl::Status Mover::NvmeToDevice(const Place& src, const Place& dst,
                                 uint64_t bytes, uint64_t checksum) {
  const ChunkCopy copy = [this](std::byte* to, const std::byte* from,
                                uint64_t n, bool /*first*/) {
    return device_->Copy(CopyKind::kH2D, to, from, n);
  };
  return RereadOnMismatch(
      [&] { return StagedRead(src, Pointer(dst), bytes, checksum, copy); });
}

absl::Status Mover::DeviceToNvme(const Place& src, const Place& dst,
                                 uint64_t bytes, uint64_t* checksum,
                                 DeviceEvent* after) {
  return StagedWrite(Pointer(src), dst, bytes, checksum,
                     [this, after](std::byte* to, const std::byte* from,
                                   uint64_t n, bool first) {
                       return device_->Copy(CopyKind::kD2H, to, from, n,
                                            first ? after : nullptr);
                     });
}

absl::Status Mover::StagedRead(const Place& src, std::byte* dst, uint64_t bytes,
                               uint64_t checksum, const ChunkCopy& copy) {
  std::unique_ptr<BouncePool::Pair> pair = bounce_->Acquire();
  const uint64_t chunk = bounce_->chunk_bytes();
  const auto read_chunk = [this, &src, &pair, chunk, bytes](uint64_t k) {
    const uint64_t at = k * chunk;
    return nvme_->Read(src.extent.offset + at, pair->chunk(k % 2),
                       RoundUpDirect(std::min(chunk, bytes - at)));
  };
  // Chunk k + 1 is read on a pipeline thread while chunk k is hashed and
  // copied out here: max(read, hash + copy) per chunk, not their sum. A
  // read in flight is waited for before any return (it writes to the pair).
  StreamingChecksum sum;
  absl::Status status = read_chunk(0);
  for (uint64_t done = 0, k = 0; status.ok() && done < bytes;
       done += chunk, ++k) {
    std::future<absl::Status> reading;
    if (done + chunk < bytes) {
      reading =
          Async(pipeline_, [&read_chunk, k] { return read_chunk(k + 1); });
    }
    const uint64_t n = std::min(chunk, bytes - done);
    std::byte* buf = pair->chunk(static_cast<int>(k % 2));
    sum.Update(buf, n);
    status = copy(dst + done, buf, n, k == 0);
    const absl::Status read = Drain(reading);
    if (status.ok()) status = read;
  }
  STRATA_RETURN_IF_ERROR(status);
  if (sum.Digest() != checksum) return ChecksumMismatch(src, bytes);
  return absl::OkStatus();
}

absl::Status Mover::StagedWrite(const std::byte* src, const Place& dst,
                                uint64_t bytes, uint64_t* checksum,
                                const ChunkCopy& copy) {
  std::unique_ptr<BouncePool::Pair> pair = bounce_->Acquire();
  const uint64_t chunk = bounce_->chunk_bytes();
  StreamingChecksum sum;
  std::future<absl::Status> writing;
  for (uint64_t done = 0, k = 0; done < bytes; done += chunk, ++k) {
    const uint64_t n = std::min(chunk, bytes - done);
    std::byte* buf = pair->chunk(static_cast<int>(k % 2));
    // Chunk k is copied in and hashed while chunk k - 1 is written.
    absl::Status copied = copy(buf, src + done, n, k == 0);
    if (copied.ok()) sum.Update(buf, n);
    absl::Status written = Drain(writing);
    STRATA_RETURN_IF_ERROR(copied);
    STRATA_RETURN_IF_ERROR(written);
    const uint64_t address = dst.extent.offset + done;
    writing = Async(pipeline_, [this, address, buf, n] {
      return nvme_->Write(address, buf, RoundUpDirect(n));
    });
  }
  STRATA_RETURN_IF_ERROR(Drain(writing));
  *checksum = sum.Digest();
  return absl::OkStatus();
}

absl::Status Mover::Migrate(const ManagedRange& range, MemLocation to,
                            bool discard, DeviceEvent* after,
                            std::string_view label) {
  const absl::Time start = absl::Now();
  const absl::Status status = device_->PrefetchManaged(
      absl::MakeConstSpan(&range, 1), to, discard, after);
  const bool up = to == MemLocation::kDevice;
  Span(label, up ? "prefetch -> device" : "prefetch -> host", start,
       status.ok());
  // A discarding migration moves no bytes over the link.
  Count(up ? Link::kH2D : Link::kD2H, discard ? 0 : range.bytes,
        discard ? 0 : absl::ToDoubleSeconds(absl::Now() - start), status.ok());
  return status;
}

absl::Status Mover::ServeFault(const ManagedRange& range, MemLocation to,
                               std::string_view label) {
  const absl::Time start = absl::Now();
  const absl::Status status = device_->ServeFault(range, to);
  const bool up = to == MemLocation::kDevice;
  Span(label, up ? "fault -> device" : "fault -> host", start, status.ok());
  Count(up ? Link::kH2D : Link::kD2H, range.bytes,
        absl::ToDoubleSeconds(absl::Now() - start), status.ok());
  return status;
}

void Mover::Span(std::string_view label, std::string_view lane,
                 absl::Time start, bool ok) {
  if (timeline_ == nullptr) return;
  timeline_->Record(absl::StrFormat("%s%s", label, ok ? "" : " (failed)"),
                    std::string(lane), start, absl::Now());
}

absl::Status Mover::Zero(const Place& place, uint64_t bytes) {
  if (place.tier == Tier::kHost) {
    std::memset(Pointer(place), 0, bytes);
    return absl::OkStatus();
  }
  static const std::vector<std::byte> kZeros(1 * kMiB);
  for (uint64_t done = 0; done < bytes; done += kZeros.size()) {
    const uint64_t n = std::min<uint64_t>(kZeros.size(), bytes - done);
    STRATA_RETURN_IF_ERROR(
        device_->Copy(CopyKind::kH2D, Pointer(place) + done, kZeros.data(), n));
  }
  return absl::OkStatus();
}

absl::Status Mover::RereadOnMismatch(
    const std::function<absl::Status()>& read) {
  absl::Status status = read();
  if (!absl::IsDataLoss(status) || !nvme_->retries_enabled()) {
    return CountFailure(status);
  }
  // A bit flipped in the controller, the link or a buffer reads right the
  // second time; one flipped on the disk does not, and only then is the
  // copy lost. The destination is not yet valid, so it may be overwritten.
  {
    MutexLock lock(&mu_);
    ++checksum_rereads_;
  }
  return CountFailure(read());
}

absl::Status Mover::CountFailure(absl::Status status) {
  if (absl::IsDataLoss(status)) {
    MutexLock lock(&mu_);
    ++checksum_failures_;
  }
  return status;
}

absl::Status Mover::ChecksumMismatch(const Place& src, uint64_t bytes) {
  return absl::DataLossError(absl::StrFormat(
      "checksum mismatch reading %d bytes from NVMe address %d: the swap "
      "file's data is corrupt (the copy on disk was not used)",
      bytes, src.extent.offset));
}

void Mover::Count(Link link, uint64_t bytes, double seconds, bool ok) {
  MutexLock lock(&mu_);
  LinkStats& s = links_[static_cast<int>(link)];
  if (!ok) {
    ++s.failures;
    return;
  }
  s.bytes += bytes;
  s.transfers += 1;
  s.busy_seconds += seconds;
}

std::array<double, kNumLinks> Mover::Gbps() const {
  MutexLock lock(&mu_);
  std::array<double, kNumLinks> gbps{};
  for (int l = 0; l < kNumLinks; ++l) gbps[l] = links_[l].gbps();
  return gbps;
}

void Mover::AddTo(Stats* stats) const {
  MutexLock lock(&mu_);
  stats->links = links_;
  stats->checksum_failures = checksum_failures_;
  stats->checksum_rereads = checksum_rereads_;
  if (nvme_ != nullptr) stats->io_retries = nvme_->io_retries();
}

}  // namespace strata
