// nvme_tier.cc: NvmeTier, the NVMe tier's swap files and striped block I/O.
//
// Policy: Open checks every directory (exists, is a directory, writable,
// enough free space) before creating any file, so a refused Open leaves
// nothing behind. Each swap file is O_TMPFILE (or a random name unlinked at
// once, refused in world-writable directories), O_DIRECT, mode 0600, and
// preallocated with fallocate. The engine is io_uring unless
// NvmeOptions::engine (or, when it is kAuto, STRATA_IO_ENGINE) says otherwise;
// under kAuto a failed io_uring setup falls back to the thread pool with one
// notice per process on stderr.
#include "tiers/nvme/nvme_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "strata/option_names.h"
#include "strata/status.h"

namespace strata {
namespace {

constexpr mode_t kSwapFileMode = 0600;

absl::Status CheckOptions(const NvmeOptions& options) {
  if (options.directories.empty()) {
    return absl::InvalidArgumentError("NVMe tier: no directories given");
  }
  if (options.budget_bytes == 0) {
    return absl::InvalidArgumentError("NVMe tier: budget is 0 bytes");
  }
  if (options.block_size_bytes == 0 ||
      options.block_size_bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NVMe block size ", options.block_size_bytes,
        " bytes is not a positive multiple of ", kDirectIoAlignment));
  }
  if (options.queue_depth == 0) {
    return absl::InvalidArgumentError("NVMe queue depth is 0");
  }
  if (options.io_attempts == 0) {
    return absl::InvalidArgumentError(
        "NVMe io_attempts is 0: use 1 (no retries) or more");
  }
  if (!(options.io_retry_backoff_seconds >= 0 &&
        options.io_retry_backoff_seconds <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NVMe retry backoff %g s: use 0 to 1 s",
                        options.io_retry_backoff_seconds));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("statvfs '", dir, "'"));
  }
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

absl::Status NoSpaceError(const std::string& dir, uint64_t asked) {
  absl::StatusOr<uint64_t> free_bytes = FreeBytes(dir);
  return absl::ResourceExhaustedError(absl::StrCat(
      "NVMe directory '", dir, "' has ",
      free_bytes.ok() ? absl::StrCat(*free_bytes) : std::string("?"),
      " bytes free; its swap file needs ", asked,
      " bytes: lower --nvme-budget or free space"));
}

absl::Status CheckSpace(const std::string& dir, uint64_t asked) {
  STRATA_ASSIGN_OR_RETURN(const uint64_t free_bytes, FreeBytes(dir));
  if (free_bytes < asked) return NoSpaceError(dir, asked);
  return absl::OkStatus();
}

absl::Status NoDirectIoError(const std::string& dir) {
  return absl::InvalidArgumentError(absl::StrCat(
      "NVMe directory '", dir,
      "' is on a file system without O_DIRECT (tmpfs?): use a directory on "
      "a real disk"));
}

// Creates a random name with O_EXCL and unlinks it at once, for file systems
// without O_TMPFILE. Refused in world-writable directories.
absl::StatusOr<int> OpenNamedSwapFile(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NVMe directory '", dir,
        "' is world-writable and its file system lacks O_TMPFILE: use a "
        "private directory"));
  }
  absl::BitGen gen;
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::string path = absl::StrFormat("%s/.strata-swap-%016x", dir,
                                             absl::Uniform<uint64_t>(gen));
    const int fd =
        open(path.c_str(),
             O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_DIRECT | O_CLOEXEC,
             kSwapFileMode);
    if (fd < 0 && errno == EEXIST) continue;
    const int open_errno = errno;
    unlink(path.c_str());  // ours: O_EXCL created it, even if O_DIRECT failed
    if (fd >= 0) return fd;
    if (open_errno == EINVAL) return NoDirectIoError(dir);
    return absl::ErrnoToStatus(open_errno, absl::StrCat("create ", path));
  }
  return absl::AlreadyExistsError(
      absl::StrCat("NVMe directory '", dir, "': no free swap file name"));
}

absl::StatusOr<int> OpenSwapFile(const std::string& dir) {
  const int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC,
                      kSwapFileMode);
  if (fd >= 0) return fd;
  if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
    return OpenNamedSwapFile(dir);  // EINVAL: no O_TMPFILE, or no O_DIRECT
  }
  return absl::ErrnoToStatus(
      errno, absl::StrCat("open O_TMPFILE swap file in '", dir, "'"));
}

absl::Status Preallocate(int fd, const std::string& dir, uint64_t bytes) {
  const auto len = static_cast<off_t>(bytes);
  int rc;
  while ((rc = fallocate(fd, 0, 0, len)) != 0 && errno == EINTR) {
  }
  if (rc == 0) return absl::OkStatus();
  if (errno == ENOSPC || errno == EFBIG) return NoSpaceError(dir, bytes);
  if (errno == EOPNOTSUPP && ftruncate(fd, len) == 0) {
    return absl::OkStatus();  // sparse: space runs out at write time instead
  }
  return absl::ErrnoToStatus(
      errno, absl::StrCat("fallocate ", bytes, " bytes in '", dir, "'"));
}

// The engine asked for: an explicit `option`, else STRATA_IO_ENGINE, else
// kAuto. Sets `*source` to what asked.
absl::StatusOr<IoEngine> ChooseEngine(IoEngine option, std::string* source) {
  const char* env = std::getenv("STRATA_IO_ENGINE");
  if (option != IoEngine::kAuto || env == nullptr || *env == '\0') {
    *source = "the engine option (--io-engine)";
    return option;
  }
  *source = absl::StrCat("STRATA_IO_ENGINE=", env);
  return ParseIoEngine(env, "STRATA_IO_ENGINE");
}

void NoticeFallbackOnce(const std::string& reason) {
  static std::once_flag once;
  std::call_once(once, [&reason] {
    std::fprintf(stderr,
                 "strata: io_uring unavailable (%s); using the pread/pwrite "
                 "thread pool\n",
                 reason.c_str());
  });
}

// Opens the engine `options` ask for; sets `*fallback_reason` when it is the
// thread pool.
absl::StatusOr<std::unique_ptr<BlockIo>> OpenEngine(
    const NvmeOptions& options, const std::vector<int>& fds,
    const std::vector<iovec>& buffers, std::string* fallback_reason) {
  std::string source;
  STRATA_ASSIGN_OR_RETURN(const IoEngine engine,
                          ChooseEngine(options.engine, &source));
  if (engine == IoEngine::kThreadPool) {
    *fallback_reason = absl::StrCat("requested by ", source);
    return OpenThreadPoolBlockIo(fds, options.queue_depth);
  }
  absl::StatusOr<std::unique_ptr<BlockIo>> uring =
      OpenUringBlockIo(fds, options.queue_depth, buffers);
  if (uring.ok() || engine == IoEngine::kIoUring) return uring;
  *fallback_reason = std::string(uring.status().message());
  NoticeFallbackOnce(*fallback_reason);
  return OpenThreadPoolBlockIo(fds, options.queue_depth);
}

}  // namespace

absl::Status CheckNvmeDirectory(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("NVMe directory '", dir,
                       "' does not exist: create it or pass another "
                       "--nvme-dir"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("stat '", dir, "'"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NVMe directory '", dir, "' is not a directory"));
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "NVMe directory '", dir,
        "' is not writable by this user: fix its permissions or pass "
        "another --nvme-dir"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NvmeTier>> NvmeTier::Open(
    const NvmeOptions& options, const std::vector<iovec>& buffers,
    BlockIoWrapper wrapper) {
  STRATA_RETURN_IF_ERROR(CheckOptions(options));
  const uint64_t n = options.directories.size();
  const uint64_t block = options.block_size_bytes;
  const uint64_t per_dir = (options.budget_bytes + n - 1) / n;
  const uint64_t per_file = (per_dir + block - 1) / block * block;
  for (const std::string& dir : options.directories) {
    STRATA_RETURN_IF_ERROR(CheckNvmeDirectory(dir));
    STRATA_RETURN_IF_ERROR(CheckSpace(dir, per_file));
  }
  std::unique_ptr<NvmeTier> tier(new NvmeTier());  // closes fds on error
  tier->per_file_bytes_ = per_file;
  tier->capacity_ = per_file * n;
  tier->block_ = block;
  for (const std::string& dir : options.directories) {
    STRATA_ASSIGN_OR_RETURN(const int fd, OpenSwapFile(dir));
    tier->fds_.push_back(fd);
    tier->dirs_.push_back(dir);
    STRATA_RETURN_IF_ERROR(Preallocate(fd, dir, per_file));
  }
  STRATA_ASSIGN_OR_RETURN(tier->io_, OpenEngine(options, tier->fds_, buffers,
                                                &tier->fallback_reason_));
  if (wrapper) tier->io_ = wrapper(std::move(tier->io_));
  // Outermost, so retries also cover what a wrapper injects.
  auto retrying = std::make_unique<RetryingBlockIo>(
      std::move(tier->io_),
      RetryPolicy{.attempts = options.io_attempts,
                  .backoff_seconds = options.io_retry_backoff_seconds});
  tier->retrying_ = retrying.get();
  tier->attempts_ = options.io_attempts;
  tier->io_ = std::move(retrying);
  return tier;
}

NvmeTier::~NvmeTier() {
  io_.reset();  // its threads stop before the files go
  for (const int fd : fds_) close(fd);
}

absl::Status NvmeTier::Read(uint64_t address, void* buf, uint64_t bytes) {
  return Transfer(IoOp::kRead, address, buf, bytes);
}

absl::Status NvmeTier::Write(uint64_t address, const void* buf,
                             uint64_t bytes) {
  // The engine only reads from `buf` for a write.
  return Transfer(IoOp::kWrite, address, const_cast<void*>(buf), bytes);
}

// Splits [address, address + bytes) at block boundaries into one request per
// block piece (see the striping in nvme_tier.h) and runs them together.
absl::Status NvmeTier::Transfer(IoOp op, uint64_t address, void* buf,
                                uint64_t bytes) {
  const auto buf_bits = reinterpret_cast<uintptr_t>(buf);
  if (address % kDirectIoAlignment != 0 || bytes % kDirectIoAlignment != 0 ||
      buf_bits % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NVMe %s: address %u, buffer %p and size %u must all be multiples "
        "of %u",
        op == IoOp::kRead ? "read" : "write", address, buf, bytes,
        kDirectIoAlignment));
  }
  if (address > capacity_ || bytes > capacity_ - address) {
    return absl::OutOfRangeError(
        absl::StrCat("NVMe ", op == IoOp::kRead ? "read" : "write", " of ",
                     bytes, " bytes at address ", address,
                     " passes the tier's capacity of ", capacity_, " bytes"));
  }
  const uint64_t n = fds_.size();
  std::vector<IoRequest> requests;
  requests.reserve(bytes / block_ + 2);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t a = address + done;
    const uint64_t block_index = a / block_;
    const uint64_t len = std::min(bytes - done, block_ - a % block_);
    requests.push_back(IoRequest{op, static_cast<int>(block_index % n),
                                 block_index / n * block_ + a % block_,
                                 static_cast<char*>(buf) + done, len});
    done += len;
  }
  absl::Status status = io_->Run(requests);
  if (absl::IsResourceExhausted(status)) return NameFullDisk(status, requests);
  return status;
}

// The engines know the swap files only by index: a full-disk error gets the
// directories of the files the failed transfer wrote to.
absl::Status NvmeTier::NameFullDisk(
    const absl::Status& status, absl::Span<const IoRequest> requests) const {
  std::vector<std::string> dirs;
  for (const IoRequest& r : requests) {
    const std::string& dir = dirs_[static_cast<size_t>(r.file_index)];
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) {
      dirs.push_back(dir);
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "NVMe directory ", dirs.size() > 1 ? "(one of) '" : "'",
      absl::StrJoin(dirs, "', '"), "' is on a full disk: ", status.message()));
}

std::vector<std::string> NvmeTier::DescribeFiles() const {
  std::vector<std::string> out;
  for (const std::string& dir : dirs_) {
    out.push_back(absl::StrCat(dir, " (", per_file_bytes_, " bytes)"));
  }
  return out;
}

}  // namespace strata
