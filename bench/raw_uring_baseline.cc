// raw_uring_baseline.cc: the raw io_uring baselines of store_roundtrip_bench
// (see raw_uring_baseline.h).
#include "bench/raw_uring_baseline.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "base/xxh3.h"
#include "bench/aligned_buffer.h"

namespace strata {
namespace {

// Looks at `bytes` of `buf` as kReadTouch or kReadXxh3 says; a value the
// compiler cannot drop.
uint64_t LookAt(RawOp op, const unsigned char* buf, uint64_t bytes) {
  if (op == RawOp::kReadXxh3) return XXH3_64bits(buf, bytes);
  uint64_t sum = 0;
  for (uint64_t at = 0; at < bytes; at += 64) sum += buf[at];
  return sum;
}

// A private O_DIRECT file on a depth-32 ring; liburing used directly.
class RawUring {
 public:
  ~RawUring() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }

  // Opens the file and the ring and registers the file and `buf` with it,
  // as the store's engine does (plain ops if registration is refused).
  // Empty string on success, else what failed.
  std::string Open(const std::string& dir, uint64_t file_bytes,
                   unsigned char* buf, uint64_t bytes) {
    path_ = dir + "/raw_uring.dat";
    fd_ = open(path_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_DIRECT | O_CLOEXEC,
               0600);
    if (fd_ < 0) return Errno("open " + path_);
    if (fallocate(fd_, 0, 0, static_cast<off_t>(file_bytes)) != 0) {
      return Errno("fallocate");
    }
    const int rc = io_uring_queue_init(kUringQueueDepth, &ring_, 0);
    if (rc < 0) {
      return absl::StrFormat("io_uring_queue_init: %s", strerror(-rc));
    }
    ring_ok_ = true;
    const iovec iov{buf, static_cast<size_t>(bytes)};
    const int files = io_uring_register_files(&ring_, &fd_, 1);
    const int bufs =
        files < 0 ? files : io_uring_register_buffers(&ring_, &iov, 1);
    fixed_ = files >= 0 && bufs >= 0;
    mode_ = fixed_ ? "fixed file+buffer"
                   : absl::StrFormat("plain ops (register: %s)",
                                     strerror(-std::min(files, bufs)));
    return "";
  }

  // "fixed file+buffer", or "plain ops (...)" with why.
  const std::string& mode() const { return mode_; }

  // Writes or reads `bytes` (a multiple of 4096) at offset 0 in requests of
  // kUringRequestBytes (or `bytes` if smaller), at most kUringQueueDepth in
  // flight, all of a batch submitted together; reaps every completion. Empty
  // string on success; a failed or short request is an error.
  std::string Run(bool write, unsigned char* buf, uint64_t bytes) {
    const uint64_t req = std::min(kUringRequestBytes, bytes);
    uint64_t offset = 0;
    while (offset < bytes) {
      unsigned queued = 0;
      for (; queued < kUringQueueDepth && offset < bytes; ++queued) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) return "io_uring_get_sqe: submission queue full";
        const unsigned len =
            static_cast<unsigned>(std::min(req, bytes - offset));
        if (fixed_ && write) {
          io_uring_prep_write_fixed(sqe, 0, buf + offset, len, offset, 0);
        } else if (fixed_) {
          io_uring_prep_read_fixed(sqe, 0, buf + offset, len, offset, 0);
        } else if (write) {
          io_uring_prep_write(sqe, fd_, buf + offset, len, offset);
        } else {
          io_uring_prep_read(sqe, fd_, buf + offset, len, offset);
        }
        if (fixed_) io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
        io_uring_sqe_set_data64(sqe, len);
        offset += len;
      }
      const int submitted = io_uring_submit(&ring_);
      if (submitted < 0) {
        return absl::StrFormat("io_uring_submit: %s", strerror(-submitted));
      }
      if (static_cast<unsigned>(submitted) != queued) {
        return absl::StrFormat("io_uring_submit took %d of %d", submitted,
                               queued);
      }
      std::string error;
      for (unsigned done = 0; done < queued; ++done) {
        io_uring_cqe* cqe = nullptr;
        const int rc = io_uring_wait_cqe(&ring_, &cqe);
        if (rc < 0) {
          return absl::StrFormat("io_uring_wait_cqe: %s", strerror(-rc));
        }
        const uint64_t want = io_uring_cqe_get_data64(cqe);
        if (error.empty() && cqe->res < 0) {
          error = absl::StrFormat("%s: %s", write ? "write" : "read",
                                  strerror(-cqe->res));
        } else if (error.empty() && static_cast<uint64_t>(cqe->res) != want) {
          error = absl::StrFormat("short %s: %d of %d bytes",
                                  write ? "write" : "read", cqe->res, want);
        }
        io_uring_cqe_seen(&ring_, cqe);
      }
      if (!error.empty()) return error;
    }
    return "";
  }

 private:
  static std::string Errno(const std::string& what) {
    return absl::StrFormat("%s: %s", what, strerror(errno));
  }

  std::string path_;
  int fd_ = -1;
  io_uring ring_{};
  bool ring_ok_ = false;
  bool fixed_ = false;
  std::string mode_;
};

}  // namespace

void BM_Uring(benchmark::State& state, const std::string& dir, uint64_t size,
              RawOp op) {
  if (size % kDirectIoBytes != 0) {
    state.SkipWithError("O_DIRECT needs a multiple of 4096 bytes");
    return;
  }
  RawUring raw;
  AlignedBuffer buf(size);
  FillSplitMix64(buf.data, size, 3);
  std::string error = raw.Open(dir, RoundUp(size, kMiB), buf.data, size);
  // Warm-up: put the pattern in the file (the read case reads it back).
  if (error.empty()) error = raw.Run(true, buf.data, size);
  if (error.empty()) error = raw.Run(false, buf.data, size);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  const bool writes = op == RawOp::kWrite || op == RawOp::kWriteRead;
  const bool looks = op == RawOp::kReadTouch || op == RawOp::kReadXxh3;
  for (auto _ : state) {
    if (writes) error = raw.Run(true, buf.data, size);
    if (error.empty() && op != RawOp::kWrite) {
      error = raw.Run(false, buf.data, size);
    }
    if (error.empty() && looks) {
      benchmark::DoNotOptimize(LookAt(op, buf.data, size));
    }
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
  if (!error.empty()) return;
  std::memset(buf.data, 0, size);
  error = raw.Run(false, buf.data, size);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
  } else if (!MatchesPattern(buf.data, size, 3)) {
    state.SkipWithError("io_uring: the file does not hold the pattern");
  }
  state.SetLabel(raw.mode());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

}  // namespace strata
