// uring_block_io.cc: the io_uring BlockIo engine.
//
// Policy: one ring of `queue_depth` entries shared by every caller. Run()
// prepares and submits its requests under mu_, taking one in-flight slot per
// request and waiting (mu_ released) while all queue_depth slots are taken.
// The callers that wait reap the completion queue themselves, one at a time
// (leader/follower): a waiting caller with nobody reaping becomes the reaper,
// waits in the kernel for completions with mu_ released, then handles every
// completion it got (its own and other callers') and steps down; the others
// wait on mu_ for their requests or for the reaper's seat. So a lone caller
// is woken by the kernel itself, not by a second thread (a handoff that cost
// a wake-up per request). Per-request state (UringOp) travels in user_data;
// the reaper resubmits short reads/writes for the remainder and retries
// -EAGAIN/-EINTR while keeping the slot, and finishes a request on success,
// error or end of file. A Run returns only once every one of its requests
// has completed in the kernel, so the kernel never writes to a buffer whose
// caller has moved on. Only a caller with requests in the kernel waits there,
// so every wait ends.
//
// Files are registered (IOSQE_FIXED_FILE) and the given buffers registered in
// pieces of at most 1 GiB (READ_FIXED/WRITE_FIXED); where either registration
// fails (RLIMIT_MEMLOCK, EPERM, too many buffers) the engine uses the plain
// ops and remembers why. A hard io_uring_enter failure takes the ring out of
// service: SQEs the kernel did not take become ignored NOPs, their requests
// and all later ones fail with Unavailable.
#include <liburing.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/sync.h"
#include "strata/status.h"
#include "tiers/nvme/block_io.h"
#include "tiers/nvme/io_error.h"

namespace strata {
namespace {

constexpr uint64_t kMaxFixedBufferBytes = uint64_t{1} << 30;
// The most one SQE asks for; larger requests go on as short I/O would.
constexpr uint64_t kMaxSqeBytes = uint64_t{1} << 30;
constexpr uint32_t kMaxQueueDepth = 4096;
constexpr int kMaxRetries = 1000;  // -EAGAIN/-EINTR per request or submit
// user_data values that are never a UringOp address (NOPs that stand in for
// SQEs the kernel refused).
constexpr uint64_t kIgnoreUserData = 1;
// RunInOrder's mark for a request with no op (0 bytes: nothing to do).
constexpr size_t kNoOp = std::numeric_limits<size_t>::max();

// One Run's progress: requests not finished yet and the first error.
struct Batch {
  size_t remaining = 0;
  absl::Status status;
};

// Per-request state; its address is the SQE's user_data. Its caller's until
// submitted, then the reaper's (under mu_) until it finishes.
struct UringOp {
  uint64_t batch = 0;  // key in UringBlockIo::batches_
  IoRequest request;
  uint64_t done = 0;   // bytes moved so far
  int buf_index = -1;  // registered buffer piece, or -1 for the plain ops
  int retries = 0;
  bool finished = false;  // no longer in the kernel; `status` is its outcome
  absl::Status status;
};

// A registered buffer piece.
struct FixedBuffer {
  uintptr_t base;
  uint64_t bytes;
};

class UringBlockIo final : public BlockIo {
 public:
  UringBlockIo(const std::vector<int>& fds, uint32_t queue_depth)
      : fds_(fds), depth_(std::min(queue_depth, kMaxQueueDepth)) {}
  ~UringBlockIo() override;

  // Sets up the ring and the registrations.
  absl::Status Init(const std::vector<iovec>& buffers);

  std::string_view engine_name() const override { return "io_uring"; }
  absl::Status Run(absl::Span<const IoRequest> requests) override;
  absl::Status RunInOrder(absl::Span<const IoRequest> requests,
                          OnDone on_done) override;

 private:
  void RegisterFiles();
  void RegisterBuffers(const std::vector<iovec>& buffers);
  int FindFixedBuffer(const IoRequest& request) const;
  absl::Status CheckRequests(absl::Span<const IoRequest> requests) const;

  bool HasFreeSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ < depth_;
  }
  io_uring_sqe* PrepOp(UringOp* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Submits ops[*next...] while slots are free (all of them, finished with
  // the ring's error, once it is out of service).
  void SubmitFrom(std::vector<UringOp>& ops, size_t* next, Batch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Submit(absl::Span<UringOp* const> ops,
              absl::Span<io_uring_sqe* const> sqes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkBroken(int rc, absl::Span<UringOp* const> ops,
                  absl::Span<io_uring_sqe* const> sqes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(UringOp* op, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resubmit(UringOp* op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(UringOp* op, int res) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until `ready()`, reaping completions while nobody else does.
  void AwaitReaping(const std::function<bool()>& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // As the reaper: waits in the kernel for completions (mu_ released), then
  // handles them. Called with reaping_ false.
  void ReapOnce() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after Init.
  const std::vector<int> fds_;
  const uint32_t depth_;
  bool fixed_files_ = false;
  std::vector<FixedBuffer> fixed_buffers_;
  std::string fixed_files_reason_;    // why files are not registered, or ""
  std::string fixed_buffers_reason_;  // why buffers are not registered, or ""

  // The submission side of ring_ is guarded by mu_; its completion side
  // belongs to the caller that set reaping_, which alone uses reaped_.
  io_uring ring_;
  bool ring_ready_ = false;
  std::vector<std::pair<uint64_t, int>> reaped_;

  Mutex mu_;
  bool reaping_ ABSL_GUARDED_BY(mu_) = false;  // a caller reaps the CQ
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // OK while in service
  // The Runs in progress, by id; nodes, so a Run may hold its entry's
  // address while others come and go.
  absl::node_hash_map<uint64_t, Batch> batches_ ABSL_GUARDED_BY(mu_);
  uint64_t next_batch_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string ErrnoText(int errno_value) { return std::strerror(errno_value); }

absl::Status InitError(int errno_value) {
  std::string hint;
  if (errno_value == EPERM) hint = " (seccomp or kernel.io_uring_disabled?)";
  if (errno_value == ENOSYS) hint = " (kernel without io_uring)";
  if (errno_value == ENOMEM) hint = " (RLIMIT_MEMLOCK too low?)";
  return absl::UnavailableError(
      absl::StrCat("io_uring_queue_init: ", ErrnoText(errno_value), hint));
}

UringBlockIo::~UringBlockIo() {
  // No Run is in progress, so no request is in the kernel.
  if (ring_ready_) io_uring_queue_exit(&ring_);
}

absl::Status UringBlockIo::Init(const std::vector<iovec>& buffers) {
  const int rc = io_uring_queue_init(depth_, &ring_, 0);
  if (rc < 0) return InitError(-rc);
  ring_ready_ = true;
  RegisterFiles();
  RegisterBuffers(buffers);
  return absl::OkStatus();
}

void UringBlockIo::RegisterFiles() {
  const int rc = io_uring_register_files(&ring_, fds_.data(),
                                         static_cast<unsigned>(fds_.size()));
  fixed_files_ = rc == 0;
  if (rc < 0) {
    fixed_files_reason_ =
        absl::StrCat("io_uring_register_files: ", ErrnoText(-rc));
  }
}

void UringBlockIo::RegisterBuffers(const std::vector<iovec>& buffers) {
  std::vector<iovec> pieces;
  for (const iovec& v : buffers) {
    auto* base = static_cast<char*>(v.iov_base);
    for (uint64_t off = 0; off < v.iov_len; off += kMaxFixedBufferBytes) {
      const uint64_t len =
          std::min<uint64_t>(kMaxFixedBufferBytes, v.iov_len - off);
      pieces.push_back(iovec{base + off, len});
    }
  }
  if (pieces.empty()) return;
  const int rc = io_uring_register_buffers(
      &ring_, pieces.data(), static_cast<unsigned>(pieces.size()));
  if (rc < 0) {
    fixed_buffers_reason_ =
        absl::StrCat("io_uring_register_buffers: ", ErrnoText(-rc));
    return;
  }
  for (const iovec& p : pieces) {
    fixed_buffers_.push_back(
        FixedBuffer{reinterpret_cast<uintptr_t>(p.iov_base), p.iov_len});
  }
}

// The index of the registered piece that holds all of `request`'s buffer, or
// -1. Scans: there are few pieces.
int UringBlockIo::FindFixedBuffer(const IoRequest& request) const {
  const auto begin = reinterpret_cast<uintptr_t>(request.buf);
  for (size_t i = 0; i < fixed_buffers_.size(); ++i) {
    const FixedBuffer& b = fixed_buffers_[i];
    if (begin >= b.base && begin - b.base + request.bytes <= b.bytes) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

absl::Status UringBlockIo::CheckRequests(
    absl::Span<const IoRequest> requests) const {
  for (const IoRequest& r : requests) {
    if (r.file_index < 0 || static_cast<size_t>(r.file_index) >= fds_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("nvme ", IoOpName(r.op), ": file index ", r.file_index,
                       " out of range [0, ", fds_.size(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status UringBlockIo::Run(absl::Span<const IoRequest> requests) {
  return RunInOrder(requests, [](size_t) { return absl::OkStatus(); });
}

absl::Status UringBlockIo::RunInOrder(absl::Span<const IoRequest> requests,
                                      OnDone on_done) {
  STRATA_RETURN_IF_ERROR(CheckRequests(requests));
  std::vector<UringOp> ops;  // stable: reserved, never grown below
  ops.reserve(requests.size());
  std::vector<size_t> op_of(requests.size(), kNoOp);
  mu_.Lock();
  const uint64_t id = next_batch_++;
  for (size_t i = 0; i < requests.size(); ++i) {
    const IoRequest& r = requests[i];
    if (r.bytes == 0) continue;  // a 0-byte read would look like end of file
    op_of[i] = ops.size();
    ops.push_back(UringOp{id, r, 0, FindFixedBuffer(r), 0});
  }
  Batch& batch = batches_[id];  // stable: node_hash_map
  batch.remaining = ops.size();
  size_t next_submit = 0;
  size_t next_hand = 0;  // the next request for on_done
  bool handing = true;   // false after a failure (ours or on_done's)
  absl::Status refused;  // on_done's error
  const auto hand_ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!handing || next_hand == requests.size()) return false;
    const size_t k = op_of[next_hand];
    return k == kNoOp || ops[k].finished;
  };
  const auto progress = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return batch.remaining == 0 || hand_ready() ||
           (next_submit < ops.size() && HasFreeSlot());
  };
  while (true) {
    SubmitFrom(ops, &next_submit, batch);
    while (hand_ready()) {
      const size_t k = op_of[next_hand];
      if (k != kNoOp && !ops[k].status.ok()) {
        handing = false;
        break;
      }
      mu_.Unlock();  // later requests go on moving meanwhile
      refused = on_done(next_hand);
      mu_.Lock();
      if (!refused.ok()) handing = false;
      ++next_hand;
    }
    if (batch.remaining == 0 && !hand_ready()) break;
    AwaitReaping(progress);
  }
  const absl::Status status = refused.ok() ? batch.status : refused;
  batches_.erase(id);
  mu_.Unlock();
  return status;
}

void UringBlockIo::SubmitFrom(std::vector<UringOp>& ops, size_t* next,
                              Batch& batch) {
  if (!broken_.ok()) {  // the rest never reach the kernel
    for (; *next < ops.size(); ++*next) {
      ops[*next].finished = true;
      ops[*next].status = broken_;
      if (batch.status.ok()) batch.status = broken_;
      --batch.remaining;
    }
    return;
  }
  std::vector<UringOp*> prepared;
  std::vector<io_uring_sqe*> sqes;
  for (; *next < ops.size() && HasFreeSlot(); ++*next) {
    ++in_flight_;
    prepared.push_back(&ops[*next]);
    sqes.push_back(PrepOp(&ops[*next]));
  }
  if (!prepared.empty()) Submit(prepared, sqes);
}

void UringBlockIo::AwaitReaping(const std::function<bool()>& ready) {
  const auto ready_or_seat = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return ready() || !reaping_;
  };
  while (!ready()) {
    if (!reaping_) {
      ReapOnce();
    } else {
      mu_.Await(Condition(&ready_or_seat));
    }
  }
}

void UringBlockIo::ReapOnce() {
  reaping_ = true;
  mu_.Unlock();
  // Copy the completions out and free their CQ slots before taking mu_.
  reaped_.clear();
  io_uring_cqe* cqe = nullptr;
  if (io_uring_wait_cqe(&ring_, &cqe) == 0) {  // else -EINTR: wait again
    unsigned head;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      reaped_.emplace_back(cqe->user_data, cqe->res);
    }
    io_uring_cq_advance(&ring_, static_cast<unsigned>(reaped_.size()));
  }
  mu_.Lock();
  reaping_ = false;
  for (const auto& [user_data, res] : reaped_) {
    if (user_data <= kIgnoreUserData) continue;
    Complete(reinterpret_cast<UringOp*>(user_data), res);
  }
}

// Fills an SQE for the part of `op` not yet done. The SQ has room: it holds
// at least depth_ entries, and Submit leaves it empty.
io_uring_sqe* UringBlockIo::PrepOp(UringOp* op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  const IoRequest& r = op->request;
  char* buf = static_cast<char*>(r.buf) + op->done;
  const auto len =
      static_cast<unsigned>(std::min(r.bytes - op->done, kMaxSqeBytes));
  const uint64_t offset = r.offset + op->done;
  const int fd = fixed_files_ ? r.file_index : fds_[r.file_index];
  if (r.op == IoOp::kRead && op->buf_index >= 0) {
    io_uring_prep_read_fixed(sqe, fd, buf, len, offset, op->buf_index);
  } else if (r.op == IoOp::kRead) {
    io_uring_prep_read(sqe, fd, buf, len, offset);
  } else if (op->buf_index >= 0) {
    io_uring_prep_write_fixed(sqe, fd, buf, len, offset, op->buf_index);
  } else {
    io_uring_prep_write(sqe, fd, buf, len, offset);
  }
  if (fixed_files_) io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
  io_uring_sqe_set_data(sqe, op);
  return sqe;
}

// Submits the SQEs just prepared for `ops` (sqes[i] for ops[i]) until the
// kernel has taken them all, retrying transient failures.
void UringBlockIo::Submit(absl::Span<UringOp* const> ops,
                          absl::Span<io_uring_sqe* const> sqes) {
  int tries = 0;
  while (io_uring_sq_ready(&ring_) > 0) {
    const int rc = io_uring_submit(&ring_);
    if (rc > 0) continue;
    const bool transient =
        rc == 0 || rc == -EINTR || rc == -EAGAIN || rc == -EBUSY;
    if (!transient || ++tries > kMaxRetries) return MarkBroken(rc, ops, sqes);
    // -EBUSY would mean a full CQ; it has 2 * depth_ entries and at most
    // depth_ requests are in the kernel, so it is not expected.
    std::this_thread::yield();
  }
}

// Takes the ring out of service after io_uring_submit failed with `rc`: the
// SQEs the kernel did not take (the last ones of `sqes`) become NOPs whose
// completions are ignored, and their ops finish with the error.
void UringBlockIo::MarkBroken(int rc, absl::Span<UringOp* const> ops,
                              absl::Span<io_uring_sqe* const> sqes) {
  broken_ = absl::UnavailableError(absl::StrCat(
      "io_uring_submit: ", rc < 0 ? ErrnoText(-rc) : std::string("no progress"),
      "; the io_uring engine is out of service"));
  const size_t stale = std::min<size_t>(io_uring_sq_ready(&ring_), ops.size());
  for (size_t i = ops.size() - stale; i < ops.size(); ++i) {
    io_uring_prep_nop(sqes[i]);
    io_uring_sqe_set_data64(sqes[i], kIgnoreUserData);
    Finish(ops[i], broken_);
  }
}

// Releases `op`'s slot and records its outcome; its caller may return (and
// free `op`) once the lock is dropped.
void UringBlockIo::Finish(UringOp* op, const absl::Status& status) {
  --in_flight_;
  op->finished = true;
  op->status = status;
  Batch& batch = batches_.at(op->batch);
  if (!status.ok() && batch.status.ok()) batch.status = status;
  --batch.remaining;
}

void UringBlockIo::Resubmit(UringOp* op) {
  if (!broken_.ok()) return Finish(op, broken_);
  UringOp* ops[] = {op};
  io_uring_sqe* sqes[] = {PrepOp(op)};
  Submit(ops, sqes);
}

// Handles one completion of `op` with result `res`.
void UringBlockIo::Complete(UringOp* op, int res) {
  const IoRequest& r = op->request;
  if (res == -EAGAIN || res == -EINTR) {
    if (++op->retries <= kMaxRetries) return Resubmit(op);
    return Finish(op, IoErrnoStatus(r, -res));
  }
  if (res < 0) return Finish(op, IoErrnoStatus(r, -res));
  if (res == 0) {  // no progress: end of file, or a write that cannot go on
    return Finish(op, r.op == IoOp::kRead ? IoEofStatus(r, op->done)
                                          : IoErrnoStatus(r, EIO));
  }
  op->done += static_cast<uint64_t>(res);
  if (op->done < r.bytes) return Resubmit(op);  // short: go on from there
  Finish(op, absl::OkStatus());
}

}  // namespace

absl::StatusOr<std::unique_ptr<BlockIo>> OpenUringBlockIo(
    const std::vector<int>& fds, uint32_t queue_depth,
    const std::vector<iovec>& buffers) {
  if (queue_depth == 0) {
    return absl::InvalidArgumentError("io_uring BlockIo: queue depth is 0");
  }
  auto io = std::make_unique<UringBlockIo>(fds, queue_depth);
  STRATA_RETURN_IF_ERROR(io->Init(buffers));
  return std::unique_ptr<BlockIo>(std::move(io));
}

}  // namespace strata
