// collectives.cc: shard offsets, one rank alone, and ranks as threads (see
// collectives.h).
#include "train/comm/collectives.h"

#include <cstring>
#include <deque>
#include <map>
#include <tuple>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace strata::train {

std::vector<int64_t> ShardOffsets(int64_t n, int ranks) {
  std::vector<int64_t> offsets(ranks + 1);
  for (int r = 0; r <= ranks; ++r) {
    // n * r fits: tensors stay below 2^40 elements, ranks below 2^20.
    offsets[r] = n * r / ranks;
  }
  return offsets;
}

std::vector<uint64_t> ShardByteOffsets(int64_t n, int ranks, uint64_t element) {
  std::vector<uint64_t> bytes;
  for (int64_t e : ShardOffsets(n, ranks)) bytes.push_back(e * element);
  return bytes;
}

absl::Status WaitAll(Collectives& c,
                     std::vector<Collectives::Request>& requests) {
  // Stops at the first error: each Wait has a deadline of its own, so
  // going on past a timeout would wait once more per request (a stuck
  // rank held an all-gather of 12 tensors for 12 timeouts). The pass the
  // requests belong to fails and is abandoned.
  for (Collectives::Request r : requests) {
    if (absl::Status s = c.Wait(r); !s.ok()) {
      requests.clear();
      return s;
    }
  }
  requests.clear();
  return absl::OkStatus();
}

absl::Status CheckAllGatherOffsets(std::span<const uint64_t> offsets,
                                   int ranks) {
  if (offsets.size() != static_cast<size_t>(ranks) + 1 || offsets[0] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "all-gather offsets: need %d, starting at 0", ranks + 1));
  }
  for (int r = 0; r < ranks; ++r) {
    if (offsets[r + 1] < offsets[r]) {
      return absl::InvalidArgumentError("all-gather offsets must not decrease");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPointToPoint(int rank, int ranks, int peer, int tag,
                               const std::string& what) {
  if (peer < 0 || peer >= ranks || peer == rank || tag < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: rank %d cannot exchange with rank %d (tag %d) of %d", what, rank,
        peer, tag, ranks));
  }
  return absl::OkStatus();
}

namespace {

class LocalCollectives final : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local"; }
  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string&) override {
    if (absl::Status s = CheckAllGatherOffsets(offsets, 1); !s.ok()) return s;
    if (offsets[1] > 0 && mine != all) std::memmove(all, mine, offsets[1]);
    return next_++;
  }
  absl::StatusOr<Request> StartSend(int to, int, const void*, uint64_t,
                                    const std::string& what) override {
    return NoPeer(to, what);
  }
  absl::StatusOr<Request> StartRecv(int from, int, void*, uint64_t,
                                    const std::string& what) override {
    return NoPeer(from, what);
  }
  absl::Status Wait(Request r) override {
    return r >= 0 && r < next_ ? absl::OkStatus()
                               : absl::NotFoundError("unknown request");
  }
  uint64_t bytes_sent() const override { return 0; }

 private:
  static absl::Status NoPeer(int peer, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: rank %d of a one-rank run does not exist", what, peer));
  }
  Request next_ = 0;
};

// What the thread ranks share: mailboxes of sent messages and the boards of
// all-gathers in progress, under one lock.
class ThreadHub {
 public:
  ThreadHub(int ranks, double timeout_seconds)
      : ranks_(ranks), timeout_(timeout_seconds) {}
  double timeout() const { return timeout_; }

  void Post(int from, int to, int tag, const void* data, uint64_t bytes) {
    std::vector<char> message(static_cast<const char*>(data),
                              static_cast<const char*>(data) + bytes);
    MutexLock lock(&mu_);
    mail_[{from, to, tag}].push_back(std::move(message));
    changed_.SignalAll();
  }

  absl::Status Take(int from, int to, int tag, void* data, uint64_t bytes,
                    const std::string& what) {
    MutexLock lock(&mu_);
    auto& box = mail_[{from, to, tag}];
    if (!AwaitLocked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !box.empty();
        })) {
      return TimedOut(to, what, from);
    }
    std::vector<char> message = std::move(box.front());
    box.pop_front();
    if (message.size() != bytes) {
      return absl::DataLossError(
          absl::StrFormat("%s: rank %d sent %d bytes, rank %d expected %d",
                          what, from, message.size(), to, bytes));
    }
    if (bytes > 0) std::memcpy(data, message.data(), bytes);
    return absl::OkStatus();
  }

  // Rank `rank`'s contribution to its all-gather number `seq`.
  void Contribute(int64_t seq, int rank, const void* mine, uint64_t bytes) {
    MutexLock lock(&mu_);
    Board& b = boards_[seq];
    b.parts.resize(ranks_);
    b.parts[rank].assign(static_cast<const char*>(mine),
                         static_cast<const char*>(mine) + bytes);
    ++b.contributed;
    changed_.SignalAll();
  }

  absl::Status Collect(int64_t seq, int rank, void* all,
                       std::span<const uint64_t> offsets,
                       const std::string& what) {
    MutexLock lock(&mu_);
    Board& b = boards_[seq];
    if (!AwaitLocked([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return b.contributed == ranks_;
        })) {
      return TimedOut(rank, what, -1);
    }
    for (int r = 0; r < ranks_; ++r) {
      const uint64_t bytes = offsets[r + 1] - offsets[r];
      if (b.parts[r].size() != bytes) {
        return absl::DataLossError(absl::StrFormat(
            "%s: rank %d contributed %d bytes, rank %d expected %d", what, r,
            b.parts[r].size(), rank, bytes));
      }
      if (bytes > 0) {
        std::memcpy(static_cast<char*>(all) + offsets[r], b.parts[r].data(),
                    bytes);
      }
    }
    if (++b.collected == ranks_) boards_.erase(seq);
    return absl::OkStatus();
  }

 private:
  struct Board {
    std::vector<std::vector<char>> parts;
    int contributed = 0;
    int collected = 0;
  };
  // Waits, mu_ held, until `ready` or the timeout; false on the timeout.
  template <typename F>
  bool AwaitLocked(const F& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time deadline = absl::Now() + absl::Seconds(timeout_);
    while (!ready()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      changed_.WaitWithTimeout(&mu_, left);
    }
    return true;
  }
  absl::Status TimedOut(int rank, const std::string& what, int peer) const {
    return CollectiveTimeout(rank, timeout_, what, peer);
  }

  const int ranks_;
  const double timeout_;
  Mutex mu_;
  CondVar changed_;  // a message or a contribution arrived
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail_
      ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Board> boards_ ABSL_GUARDED_BY(mu_);
};

class ThreadCollectives final : public Collectives {
 public:
  ThreadCollectives(std::shared_ptr<ThreadHub> hub, int rank, int ranks)
      : hub_(std::move(hub)), rank_(rank), ranks_(ranks) {}

  int rank() const override { return rank_; }
  int size() const override { return ranks_; }
  std::string name() const override { return "threads"; }
  double timeout_seconds() const override { return hub_->timeout(); }

  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string& what) override {
    if (absl::Status s = CheckAllGatherOffsets(offsets, ranks_); !s.ok())
      return s;
    const uint64_t bytes = offsets[rank_ + 1] - offsets[rank_];
    const int64_t seq = gathers_++;
    hub_->Contribute(seq, rank_, mine, bytes);
    sent_ += bytes * (ranks_ - 1);
    return Add({.gather = seq,
                .data = all,
                .offsets = {offsets.begin(), offsets.end()},
                .what = what});
  }

  absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    if (absl::Status s = CheckPeer(to, tag, what); !s.ok()) return s;
    hub_->Post(rank_, to, tag, data, bytes);  // buffered: done at once
    sent_ += bytes;
    return Add({.what = what});
  }

  absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    if (absl::Status s = CheckPeer(from, tag, what); !s.ok()) return s;
    return Add(
        {.peer = from, .tag = tag, .data = data, .bytes = bytes, .what = what});
  }

  absl::Status Wait(Request r) override {
    auto it = pending_.find(r);
    if (it == pending_.end()) return absl::NotFoundError("unknown request");
    const Pending p = std::move(it->second);
    pending_.erase(it);
    if (p.gather >= 0) {
      return hub_->Collect(p.gather, rank_, p.data, p.offsets, p.what);
    }
    if (p.peer >= 0) {
      return hub_->Take(p.peer, rank_, p.tag, p.data, p.bytes, p.what);
    }
    return absl::OkStatus();
  }

  uint64_t bytes_sent() const override { return sent_; }

 private:
  struct Pending {
    int64_t gather = -1;  // an all-gather's number, or -1
    int peer = -1;        // a receive's sender, or -1
    int tag = 0;
    void* data = nullptr;
    uint64_t bytes = 0;
    std::vector<uint64_t> offsets;
    std::string what;
  };
  Request Add(Pending p) {
    pending_.emplace(next_, std::move(p));
    return next_++;
  }
  absl::Status CheckPeer(int peer, int tag, const std::string& what) const {
    return CheckPointToPoint(rank_, ranks_, peer, tag, what);
  }

  const std::shared_ptr<ThreadHub> hub_;
  const int rank_, ranks_;
  int64_t gathers_ = 0;
  Request next_ = 0;
  std::map<Request, Pending> pending_;
  uint64_t sent_ = 0;
};

}  // namespace

absl::Status CollectiveTimeout(int rank, double timeout_seconds,
                               const std::string& what, int peer) {
  return absl::DeadlineExceededError(absl::StrFormat(
      "rank %d waited %g s for %s from %s: a rank has stopped or is stuck; "
      "if one is only slow (a long NVMe read, a loaded machine), raise "
      "--collective-timeout",
      rank, timeout_seconds, what,
      peer >= 0 ? absl::StrFormat("rank %d", peer) : "every other rank"));
}

std::unique_ptr<Collectives> MakeLocalCollectives() {
  return std::make_unique<LocalCollectives>();
}

#if !defined(STRATA_HAVE_CUDA)
absl::StatusOr<std::unique_ptr<Collectives>> MakeNcclCollectives(Collectives&,
                                                                 double) {
  return absl::FailedPreconditionError(
      "this strata was built without CUDA, so without NCCL: install the CUDA "
      "toolkit and rebuild");
}
#endif

std::vector<std::unique_ptr<Collectives>> MakeThreadCollectives(
    int ranks, double timeout_seconds) {
  auto hub = std::make_shared<ThreadHub>(ranks, timeout_seconds);
  std::vector<std::unique_ptr<Collectives>> out;
  for (int r = 0; r < ranks; ++r) {
    out.push_back(std::make_unique<ThreadCollectives>(hub, r, ranks));
  }
  return out;
}

}  // namespace strata::train
