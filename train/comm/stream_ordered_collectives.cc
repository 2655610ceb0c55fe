// stream_ordered_collectives.cc: ranks as threads under NCCL's ordering
// rules (see MakeStreamOrderedCollectives in collectives.h).
//
// NCCL runs a rank's operations on its stream one after another; a
// point-to-point send waits for the peer's receive, and the two meet in the
// order each side started them, with no tags (NCCL's "Point-to-point
// communication" notes). A protocol that MPI's tags and independent
// progress carry can deadlock or mis-deliver there. This transport runs a
// protocol by those rules on the CPU, so a test finds what NCCL would.
#include <cstring>
#include <deque>
#include <map>
#include <memory>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sync.h"
#include "train/comm/collectives.h"

namespace strata::train {
namespace {

// One started operation: the next of its rank's queue runs when its peers'
// next operations are its counterparts.
struct Op {
  enum class Kind { kAllGather, kSend, kRecv };
  Kind kind;
  int rank = 0;
  int peer = -1;  // a send's receiver, a receive's sender
  int tag = 0;
  std::vector<char> payload;  // a send's bytes, a contribution: copied
  void* data = nullptr;       // a receive's buffer, an all-gather's result
  uint64_t bytes = 0;         // a receive's size
  std::vector<uint64_t> offsets;
  std::string what;
  bool done = false;
  absl::Status status;

  std::string Describe() const {
    switch (kind) {
      case Kind::kAllGather:
        return what;
      case Kind::kSend:
        return absl::StrFormat("%s (send to rank %d, tag %d, %d bytes)", what,
                               peer, tag, payload.size());
      case Kind::kRecv:
        return absl::StrFormat("%s (receive from rank %d, tag %d, %d bytes)",
                               what, peer, tag, bytes);
    }
    return what;
  }
};

class OrderedHub {
 public:
  OrderedHub(int ranks, double timeout_seconds)
      : timeout_(timeout_seconds), queues_(ranks) {}
  double timeout() const { return timeout_; }

  void Start(const std::shared_ptr<Op>& op) {
    MutexLock lock(&mu_);
    queues_[op->rank].push_back(op);
    while (RunOneLocked()) {
    }
    changed_.SignalAll();
  }

  absl::Status Await(const std::shared_ptr<Op>& op) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(timeout_);
    while (!op->done) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return StuckLocked(*op);
      changed_.WaitWithTimeout(&mu_, left);
    }
    return op->status;
  }

  // Drops what `rank` started and never saw run (its buffers are going).
  void Leave(int rank) {
    MutexLock lock(&mu_);
    queues_[rank].clear();
  }

 private:
  // Runs one operation (or one meeting) whose counterparts are next on
  // their ranks; false when none can run.
  bool RunOneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int ranks = static_cast<int>(queues_.size());
    for (int r = 0; r < ranks; ++r) {
      if (queues_[r].empty()) continue;
      Op& head = *queues_[r].front();
      if (head.kind == Op::Kind::kAllGather) {
        if (!AllNextAreGathersLocked()) continue;
        RunAllGatherLocked();
        return true;
      }
      if (head.kind != Op::Kind::kSend || queues_[head.peer].empty()) continue;
      Op& recv = *queues_[head.peer].front();
      if (recv.kind != Op::Kind::kRecv || recv.peer != r) continue;
      Meet(head, recv);
      queues_[r].pop_front();
      queues_[recv.rank].pop_front();
      return true;
    }
    return false;
  }

  bool AllNextAreGathersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& q : queues_) {
      if (q.empty() || q.front()->kind != Op::Kind::kAllGather) return false;
    }
    return true;
  }

  void RunAllGatherLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto& q : queues_) {
      Op& to = *q.front();
      for (auto& from_queue : queues_) {
        const Op& from = *from_queue.front();
        const uint64_t at = to.offsets[from.rank];
        const uint64_t bytes = to.offsets[from.rank + 1] - at;
        if (from.payload.size() != bytes) {
          to.status = absl::DataLossError(absl::StrFormat(
              "%s: rank %d contributed %d bytes to %s, rank %d expected %d",
              to.what, from.rank, from.payload.size(), from.what, to.rank,
              bytes));
          break;
        }
        if (bytes > 0) {
          std::memcpy(static_cast<char*>(to.data) + at, from.payload.data(),
                      bytes);
        }
      }
    }
    for (auto& q : queues_) {
      q.front()->done = true;
      q.pop_front();
    }
  }

  // A send and the receive next on its peer: the bytes move if the two are
  // the same message; otherwise both fail (NCCL would deliver them).
  static void Meet(Op& send, Op& recv) {
    send.done = recv.done = true;
    if (send.tag != recv.tag || send.payload.size() != recv.bytes) {
      const absl::Status s = absl::DataLossError(absl::StrFormat(
          "rank %d's next message to rank %d is %s but rank %d's next "
          "receive from rank %d is %s: the two ranks start their exchanges "
          "in different orders, which NCCL (matching in the order started, "
          "without tags) would deliver wrongly",
          send.rank, recv.rank, send.Describe(), recv.rank, send.rank,
          recv.Describe()));
      send.status = recv.status = s;
      return;
    }
    if (recv.bytes > 0) {
      std::memcpy(recv.data, send.payload.data(), recv.bytes);
    }
  }

  // The timeout, with every rank's next operation: what waits on what.
  absl::Status StuckLocked(const Op& op) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::string next;
    for (size_t r = 0; r < queues_.size(); ++r) {
      absl::StrAppendFormat(
          &next, "%srank %d: %s", r == 0 ? "" : "; ", r,
          queues_[r].empty() ? "nothing" : queues_[r].front()->Describe());
    }
    const absl::Status timeout =
        CollectiveTimeout(op.rank, timeout_, op.what,
                          op.kind == Op::Kind::kAllGather ? -1 : op.peer);
    return absl::DeadlineExceededError(
        absl::StrFormat("%s (in stream order, each rank's next operation: %s)",
                        timeout.message(), next));
  }

  const double timeout_;
  Mutex mu_;
  CondVar changed_;  // an operation ran
  std::vector<std::deque<std::shared_ptr<Op>>> queues_ ABSL_GUARDED_BY(mu_);
};

class StreamOrderedCollectives final : public Collectives {
 public:
  StreamOrderedCollectives(std::shared_ptr<OrderedHub> hub, int rank, int ranks)
      : hub_(std::move(hub)), rank_(rank), ranks_(ranks) {}
  ~StreamOrderedCollectives() override { hub_->Leave(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return ranks_; }
  std::string name() const override { return "threads-stream-ordered"; }
  double timeout_seconds() const override { return hub_->timeout(); }

  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckAllGatherOffsets(offsets, ranks_));
    const uint64_t bytes = offsets[rank_ + 1] - offsets[rank_];
    auto op = NewOp(Op::Kind::kAllGather, -1, 0, what);
    op->payload.assign(static_cast<const char*>(mine),
                       static_cast<const char*>(mine) + bytes);
    op->data = all;
    op->offsets.assign(offsets.begin(), offsets.end());
    sent_ += bytes * (ranks_ - 1);
    return Start(std::move(op));
  }

  absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckPeer(to, tag, what));
    auto op = NewOp(Op::Kind::kSend, to, tag, what);
    op->payload.assign(static_cast<const char*>(data),
                       static_cast<const char*>(data) + bytes);
    sent_ += bytes;
    return Start(std::move(op));
  }

  absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckPeer(from, tag, what));
    auto op = NewOp(Op::Kind::kRecv, from, tag, what);
    op->data = data;
    op->bytes = bytes;
    return Start(std::move(op));
  }

  absl::Status Wait(Request r) override {
    auto it = pending_.find(r);
    if (it == pending_.end()) return absl::NotFoundError("unknown request");
    const std::shared_ptr<Op> op = std::move(it->second);
    pending_.erase(it);
    return hub_->Await(op);
  }

  uint64_t bytes_sent() const override { return sent_; }

 private:
  std::shared_ptr<Op> NewOp(Op::Kind kind, int peer, int tag,
                            const std::string& what) const {
    auto op = std::make_shared<Op>();
    op->kind = kind;
    op->rank = rank_;
    op->peer = peer;
    op->tag = tag;
    op->what = what;
    return op;
  }
  Request Start(std::shared_ptr<Op> op) {
    hub_->Start(op);
    pending_.emplace(next_, std::move(op));
    return next_++;
  }
  absl::Status CheckPeer(int peer, int tag, const std::string& what) const {
    return CheckPointToPoint(rank_, ranks_, peer, tag, what);
  }

  const std::shared_ptr<OrderedHub> hub_;
  const int rank_, ranks_;
  Request next_ = 0;
  std::map<Request, std::shared_ptr<Op>> pending_;
  uint64_t sent_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Collectives>> MakeStreamOrderedCollectives(
    int ranks, double timeout_seconds) {
  auto hub = std::make_shared<OrderedHub>(ranks, timeout_seconds);
  std::vector<std::unique_ptr<Collectives>> out;
  for (int r = 0; r < ranks; ++r) {
    out.push_back(std::make_unique<StreamOrderedCollectives>(hub, r, ranks));
  }
  return out;
}

}  // namespace strata::train
