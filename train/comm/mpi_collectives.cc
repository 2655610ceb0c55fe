// mpi_collectives.cc: Collectives over MPI_COMM_WORLD (see collectives.h):
// MPI_Iallgatherv and MPI_Isend/MPI_Irecv, waited for by polling
// MPI_Testall against a deadline, since MPI's own waits cannot time out.
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/watchdog.h"
#include "train/comm/collectives.h"

#if STRATA_HAVE_MPI

// The C API only: Open MPI's C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <map>
#include <thread>

namespace strata::train {
namespace {

// Messages are cut into pieces of at most this many bytes: MPI counts are
// int. One (sender, tag)'s pieces arrive in order (MPI's non-overtaking rule).
constexpr uint64_t kPieceBytes = uint64_t{1} << 30;

// Calls start(offset, bytes) for each piece of a `bytes`-long message (one
// empty piece for an empty one: the receiver still matches it), stopping
// at the first MPI error, which it returns.
template <typename Start>
int ForEachPiece(uint64_t bytes, const Start& start) {
  uint64_t at = 0;
  do {
    const int n = static_cast<int>(std::min(kPieceBytes, bytes - at));
    if (const int rc = start(at, n); rc != MPI_SUCCESS) return rc;
    at += n;
  } while (at < bytes);
  return MPI_SUCCESS;
}

absl::Status MpiError(int code, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return absl::InternalError(
      absl::StrFormat("%s: MPI error: %s", what, std::string(text, len)));
}

// MPI_Init and MPI_Finalize wait for every rank with no deadline of their
// own: past `seconds`, this process says so and ends (exit 1), so that a
// rank stopped before or after the run never hangs the others.
Watchdog Deadline(const char* call, double seconds) {
  return Watchdog(seconds, [call, seconds] {
    std::fprintf(stderr,
                 "strata: %s waited %g s for the other ranks: a rank has "
                 "stopped, is stuck or was started without --distributed "
                 "(every rank of the mpirun needs it; if one is only slow to "
                 "start, raise --collective-timeout)\n",
                 call, seconds);
    std::fflush(stderr);
    _exit(1);
  });
}

bool MpiActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

class MpiCollectives final : public Collectives {
 public:
  MpiCollectives(int rank, int size, double timeout, bool owns)
      : rank_(rank), size_(size), timeout_(timeout), owns_(owns) {}
  ~MpiCollectives() override {
    if (!owns_ || !MpiActive()) return;
    const Watchdog deadline = Deadline("MPI_Finalize", timeout_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  double timeout_seconds() const override { return timeout_; }

  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string& what) override {
    if (offsets.size() != static_cast<size_t>(size_) + 1 || offsets[0] != 0 ||
        offsets[size_] > INT_MAX) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: all-gather offsets must be %d, from 0, totalling at most "
          "2 GiB (MPI counts are int)",
          what, size_ + 1));
    }
    Pending p{.what = what};
    for (int r = 0; r < size_; ++r) {
      if (offsets[r + 1] < offsets[r]) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: all-gather offsets decrease", what));
      }
      p.counts.push_back(static_cast<int>(offsets[r + 1] - offsets[r]));
      p.displs.push_back(static_cast<int>(offsets[r]));
    }
    MPI_Request req;
    const int rc =
        MPI_Iallgatherv(mine, p.counts[rank_], MPI_BYTE, all, p.counts.data(),
                        p.displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req);
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    p.requests.push_back(req);
    sent_ += uint64_t(p.counts[rank_]) * (size_ - 1);
    return Add(std::move(p));
  }

  absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    if (absl::Status s = CheckPeer(to, tag, what); !s.ok()) return s;
    Pending p{.peer = to, .what = what};
    const char* src = static_cast<const char*>(data);
    const int rc = ForEachPiece(bytes, [&](uint64_t at, int n) {
      MPI_Request req;
      const int r =
          MPI_Isend(src + at, n, MPI_BYTE, to, tag, MPI_COMM_WORLD, &req);
      p.requests.push_back(req);
      return r;
    });
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    sent_ += bytes;
    return Add(std::move(p));
  }

  absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    if (absl::Status s = CheckPeer(from, tag, what); !s.ok()) return s;
    Pending p{.peer = from, .what = what};
    char* dst = static_cast<char*>(data);
    const int rc = ForEachPiece(bytes, [&](uint64_t at, int n) {
      MPI_Request req;
      const int r =
          MPI_Irecv(dst + at, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, &req);
      p.requests.push_back(req);
      p.expected.push_back(n);
      return r;
    });
    if (rc != MPI_SUCCESS) return MpiError(rc, what);
    return Add(std::move(p));
  }

  absl::Status Wait(Request r) override {
    auto it = pending_.find(r);
    if (it == pending_.end()) return absl::NotFoundError("unknown request");
    Pending p = std::move(it->second);
    pending_.erase(it);
    std::vector<MPI_Status> status(p.requests.size());
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(timeout_);
    for (;;) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(p.requests.size()),
                                 p.requests.data(), &done, status.data());
      if (rc != MPI_SUCCESS) return MpiError(rc, p.what);
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline) {
        return CollectiveTimeout(rank_, timeout_, p.what, p.peer);
      }
      // Polling, not spinning: the other ranks share this machine's cores.
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (size_t i = 0; i < p.expected.size(); ++i) {
      int got = 0;
      MPI_Get_count(&status[i], MPI_BYTE, &got);
      if (got != p.expected[i]) {
        return absl::DataLossError(
            absl::StrFormat("%s: rank %d sent %d bytes, rank %d expected %d",
                            p.what, p.peer, got, rank_, p.expected[i]));
      }
    }
    return absl::OkStatus();
  }

  uint64_t bytes_sent() const override { return sent_; }

 private:
  struct Pending {
    int peer = -1;
    std::vector<MPI_Request> requests;
    std::vector<int> expected;  // a receive's piece sizes
    // An all-gather's counts and displacements: MPI reads them until the
    // operation completes.
    std::vector<int> counts, displs;
    std::string what;
  };
  Request Add(Pending p) {
    pending_.emplace(next_, std::move(p));
    return next_++;
  }
  absl::Status CheckPeer(int peer, int tag, const std::string& what) const {
    int* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
    const int max_tag = found && tag_ub != nullptr ? *tag_ub : 32767;
    if (peer < 0 || peer >= size_ || peer == rank_ || tag < 0 ||
        tag > max_tag) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: rank %d cannot exchange with rank %d (tag %d of at most %d) of "
          "%d",
          what, rank_, peer, tag, max_tag, size_));
    }
    return absl::OkStatus();
  }

  const int rank_, size_;
  const double timeout_;
  const bool owns_;  // this object initialised MPI and finalises it
  Request next_ = 0;
  std::map<Request, Pending> pending_;
  uint64_t sent_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collectives>> MakeMpiCollectives(
    double timeout_seconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    const Watchdog deadline = Deadline("MPI_Init", timeout_seconds);
    const int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
  }
  // Errors come back as codes, to become a Status naming the operation.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Collectives>(
      new MpiCollectives(rank, size, timeout_seconds, !initialized));
}

void AbortMpiRun(int exit_code) {
  if (MpiActive()) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

}  // namespace strata::train

#else  // !STRATA_HAVE_MPI

namespace strata::train {

absl::StatusOr<std::unique_ptr<Collectives>> MakeMpiCollectives(double) {
  return absl::FailedPreconditionError(
      "this strata was built without MPI: install libopenmpi-dev and "
      "openmpi-bin (scripts/setup.sh does) and rebuild");
}

void AbortMpiRun(int) {}

}  // namespace strata::train

#endif  // STRATA_HAVE_MPI
