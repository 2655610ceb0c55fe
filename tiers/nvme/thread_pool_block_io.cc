// thread_pool_block_io.cc: the pread/pwrite BlockIo engine, the fallback
// where io_uring cannot be set up.
//
// Policy: `threads` workers take requests from one FIFO shared by all
// callers, so at most `threads` requests are in flight. Each request loops
// until every byte moved: short reads/writes continue with the remainder,
// EINTR/EAGAIN are retried, a read that returns 0 is end of file
// (OutOfRange), any other errno is mapped by IoErrnoStatus. A Run returns
// only when all of its requests have finished, failed or not.
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/sync.h"
#include "tiers/nvme/block_io.h"
#include "tiers/nvme/io_error.h"

namespace strata {
namespace {

// One Run's progress: requests not finished yet and the first error.
struct Batch {
  size_t remaining = 0;
  absl::Status status;
};

struct Job {
  uint64_t batch;  // key in ThreadPoolBlockIo::batches_
  IoRequest request;
};

// Moves every byte of `request` on `fd`, or says why not.
absl::Status RunOne(int fd, const IoRequest& request) {
  auto* buf = static_cast<char*>(request.buf);
  uint64_t done = 0;
  while (done < request.bytes) {
    const size_t len = request.bytes - done;
    const off_t offset = static_cast<off_t>(request.offset + done);
    const ssize_t n = request.op == IoOp::kRead
                          ? pread(fd, buf + done, len, offset)
                          : pwrite(fd, buf + done, len, offset);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return IoErrnoStatus(request, errno);
    }
    if (n == 0) {
      if (request.op == IoOp::kRead) return IoEofStatus(request, done);
      return IoErrnoStatus(request, EIO);  // a write that makes no progress
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

class ThreadPoolBlockIo final : public BlockIo {
 public:
  ThreadPoolBlockIo(const std::vector<int>& fds, uint32_t threads) : fds_(fds) {
    workers_.reserve(threads);
    for (uint32_t i = 0; i < threads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  ~ThreadPoolBlockIo() override {
    {
      MutexLock lock(&mu_);
      shutdown_ = true;
    }
    for (std::thread& t : workers_) t.join();
  }

  std::string_view engine_name() const override { return "thread-pool"; }

  absl::Status Run(absl::Span<const IoRequest> requests) override {
    for (const IoRequest& r : requests) {
      if (r.file_index < 0 || static_cast<size_t>(r.file_index) >= fds_.size())
        return absl::InvalidArgumentError(
            absl::StrCat("nvme ", IoOpName(r.op), ": file index ", r.file_index,
                         " out of range [0, ", fds_.size(), ")"));
    }
    MutexLock lock(&mu_);
    const uint64_t id = next_batch_++;
    batches_[id].remaining = requests.size();
    for (const IoRequest& r : requests) queue_.push_back(Job{id, r});
    const auto done = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return batches_.at(id).remaining == 0;
    };
    mu_.Await(Condition(&done));
    auto batch = batches_.extract(id);
    return batch.mapped().status;
  }

 private:
  void WorkerLoop() {
    MutexLock lock(&mu_);
    while (true) {
      mu_.Await(Condition(this, &ThreadPoolBlockIo::HasWork));
      if (queue_.empty()) return;  // shutdown_ with nothing left
      Job job = queue_.front();
      queue_.pop_front();
      absl::Status status;
      {
        MutexUnlock unlocked(&mu_);
        status = RunOne(fds_[job.request.file_index], job.request);
      }
      Batch& batch = batches_.at(job.batch);
      if (!status.ok() && batch.status.ok()) batch.status = status;
      --batch.remaining;  // the caller may return once this reaches 0
    }
  }

  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || !queue_.empty();
  }

  // Constant after construction.
  const std::vector<int> fds_;
  std::vector<std::thread> workers_;

  Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  // The Runs in progress, by id.
  absl::flat_hash_map<uint64_t, Batch> batches_ ABSL_GUARDED_BY(mu_);
  uint64_t next_batch_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BlockIo>> OpenThreadPoolBlockIo(
    const std::vector<int>& fds, uint32_t threads) {
  if (threads == 0) {
    return absl::InvalidArgumentError("thread-pool BlockIo: threads is 0");
  }
  return std::unique_ptr<BlockIo>(new ThreadPoolBlockIo(fds, threads));
}

}  // namespace strata
