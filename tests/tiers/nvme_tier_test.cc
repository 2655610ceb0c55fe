// nvme_tier_test.cc: NvmeTier's swap files (checks, privacy, preallocation),
// its striping across directories and its engine choice.
#include "tiers/nvme/nvme_tier.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "base/sync.h"
#include "gtest/gtest.h"
#include "tests/util/test_util.h"
#include "tiers/fault/faulty_block_io.h"

namespace strata {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::MatchesPattern;
using ::strata::testing::TempDir;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kBlock = 64 * kKiB;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeDeleter>;

AlignedBuffer Allocate(uint64_t bytes) {
  return AlignedBuffer(
      static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, bytes)));
}

bool IsEmptyDirectory(const std::string& dir) {
  return std::filesystem::is_empty(std::filesystem::path(dir));
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Passes requests through and records them.
class RecordingBlockIo : public BlockIo {
 public:
  explicit RecordingBlockIo(std::unique_ptr<BlockIo> inner)
      : inner_(std::move(inner)) {}
  std::string_view engine_name() const override {
    return inner_->engine_name();
  }
  absl::Status Run(absl::Span<const IoRequest> requests) override {
    {
      MutexLock lock(&mu_);
      last_.assign(requests.begin(), requests.end());
    }
    return inner_->Run(requests);
  }
  std::vector<IoRequest> last() {
    MutexLock lock(&mu_);
    return last_;
  }

 private:
  std::unique_ptr<BlockIo> inner_;
  Mutex mu_;
  std::vector<IoRequest> last_ ABSL_GUARDED_BY(mu_);
};

class NvmeTierTest : public ::testing::Test {
 protected:
  // Options for `n` fresh directories under the test's TempDir.
  NvmeOptions Options(int n, uint64_t budget_bytes) {
    NvmeOptions options;
    for (int i = 0; i < n; ++i) {
      const std::string dir = root_.path() + "/d" + std::to_string(i);
      std::filesystem::create_directories(dir);
      options.directories.push_back(dir);
    }
    options.budget_bytes = budget_bytes;
    options.block_size_bytes = kBlock;
    options.queue_depth = 8;
    return options;
  }

  TempDir root_;
};

// Writes a pattern across stripe boundaries, reads it back, and checks the
// requests follow the layout in nvme_tier.h.
void RoundTripAcrossStripes(const NvmeOptions& options) {
  RecordingBlockIo* recorder = nullptr;
  auto wrap = [&recorder](std::unique_ptr<BlockIo> io) {
    auto r = std::make_unique<RecordingBlockIo>(std::move(io));
    recorder = r.get();
    return std::unique_ptr<BlockIo>(std::move(r));
  };
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(options, {}, wrap);
  ASSERT_TRUE(tier.ok()) << tier.status();
  const uint64_t n = options.directories.size();
  const uint64_t address = kBlock - 8 * kKiB;  // 8 KiB before a boundary
  const uint64_t bytes = 5 * kBlock + 16 * kKiB;
  AlignedBuffer out = Allocate(bytes), in = Allocate(bytes);
  FillPattern(out.get(), bytes, n);
  ASSERT_TRUE((*tier)->Write(address, out.get(), bytes).ok());
  const std::vector<IoRequest> writes = recorder->last();
  std::memset(in.get(), 0, bytes);
  ASSERT_TRUE((*tier)->Read(address, in.get(), bytes).ok());
  EXPECT_TRUE(MatchesPattern(in.get(), bytes, n));

  ASSERT_EQ(writes.size(), 7u);  // 8 KiB, 5 whole blocks, 8 KiB
  uint64_t a = address;
  for (const IoRequest& r : writes) {
    const uint64_t block = a / kBlock;
    EXPECT_EQ(r.file_index, static_cast<int>(block % n));
    EXPECT_EQ(r.offset, block / n * kBlock + a % kBlock);
    EXPECT_EQ(r.buf, out.get() + (a - address));
    a += r.bytes;
  }
  EXPECT_EQ(a, address + bytes);
}

TEST_F(NvmeTierTest, RoundTripAcrossStripesTwoDirectories) {
  RoundTripAcrossStripes(Options(2, 2 * kKiB * kKiB));
}

TEST_F(NvmeTierTest, RoundTripAcrossStripesThreeDirectories) {
  RoundTripAcrossStripes(Options(3, 3 * kKiB * kKiB));
}

TEST_F(NvmeTierTest, WholeCapacityRoundTrip) {
  NvmeOptions options = Options(3, 1000 * kKiB);  // not a block multiple
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier = NvmeTier::Open(options, {});
  ASSERT_TRUE(tier.ok()) << tier.status();
  const uint64_t capacity = (*tier)->capacity_bytes();
  EXPECT_GE(capacity, options.budget_bytes);
  EXPECT_EQ(capacity % (3 * kBlock), 0u);
  AlignedBuffer out = Allocate(capacity), in = Allocate(capacity);
  FillPattern(out.get(), capacity, 11);
  ASSERT_TRUE((*tier)->Write(0, out.get(), capacity).ok());
  ASSERT_TRUE((*tier)->Read(0, in.get(), capacity).ok());
  EXPECT_TRUE(MatchesPattern(in.get(), capacity, 11));
}

TEST_F(NvmeTierTest, MisalignedArgumentsAreInvalid) {
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(Options(1, kKiB * kKiB), {});
  ASSERT_TRUE(tier.ok()) << tier.status();
  AlignedBuffer buf = Allocate(16 * kKiB);
  EXPECT_TRUE(absl::IsInvalidArgument((*tier)->Read(512, buf.get(), 4096)));
  EXPECT_TRUE(absl::IsInvalidArgument((*tier)->Read(0, buf.get() + 8, 4096)));
  EXPECT_TRUE(absl::IsInvalidArgument((*tier)->Write(0, buf.get(), 100)));
}

TEST_F(NvmeTierTest, PastCapacityIsOutOfRange) {
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(Options(2, kKiB * kKiB), {});
  ASSERT_TRUE(tier.ok()) << tier.status();
  const uint64_t capacity = (*tier)->capacity_bytes();
  AlignedBuffer buf = Allocate(8 * kKiB);
  EXPECT_TRUE(absl::IsOutOfRange((*tier)->Read(capacity, buf.get(), 4096)));
  EXPECT_TRUE(
      absl::IsOutOfRange((*tier)->Write(capacity - 4096, buf.get(), 8192)));
  EXPECT_TRUE(absl::IsOutOfRange(
      (*tier)->Read(~uint64_t{0} - 4095, buf.get(), 8192)));  // wraps
  EXPECT_TRUE((*tier)->Read(capacity - 4096, buf.get(), 4096).ok());
}

TEST_F(NvmeTierTest, BadOptionsAreInvalid) {
  NvmeOptions options = Options(1, kKiB * kKiB);
  options.block_size_bytes = 1000;
  EXPECT_TRUE(absl::IsInvalidArgument(NvmeTier::Open(options, {}).status()));
  options = Options(1, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(NvmeTier::Open(options, {}).status()));
  options = Options(0, kKiB * kKiB);
  EXPECT_TRUE(absl::IsInvalidArgument(NvmeTier::Open(options, {}).status()));
  options = Options(1, kKiB * kKiB);
  options.queue_depth = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(NvmeTier::Open(options, {}).status()));
}

TEST_F(NvmeTierTest, MissingDirectoryIsNotFound) {
  NvmeOptions options = Options(1, kKiB * kKiB);
  options.directories.push_back(root_.path() + "/missing");
  const absl::Status status = NvmeTier::Open(options, {}).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_NE(status.message().find("missing' does not exist"), std::string::npos)
      << status;
  EXPECT_TRUE(IsEmptyDirectory(options.directories[0]));
}

TEST_F(NvmeTierTest, FileInsteadOfDirectoryIsInvalid) {
  NvmeOptions options = Options(0, kKiB * kKiB);
  const std::string file = root_.path() + "/plain";
  ASSERT_EQ(close(creat(file.c_str(), 0600)), 0);
  options.directories.push_back(file);
  EXPECT_TRUE(absl::IsInvalidArgument(NvmeTier::Open(options, {}).status()));
}

TEST_F(NvmeTierTest, UnwritableDirectoryIsPermissionDenied) {
  NvmeOptions options = Options(1, kKiB * kKiB);
  ASSERT_EQ(chmod(options.directories[0].c_str(), 0555), 0);
  if (access(options.directories[0].c_str(), W_OK) != 0) {
    const absl::Status status = NvmeTier::Open(options, {}).status();
    EXPECT_TRUE(absl::IsPermissionDenied(status)) << status;
    return;
  }
  // Root writes anywhere: check as "nobody" in a child process instead.
  if (geteuid() != 0) GTEST_SKIP() << "0555 directory is writable here";
  ASSERT_EQ(chmod(root_.path().c_str(), 0755), 0);
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-exec, no fork
  EXPECT_EXIT(
      {
        if (setgid(65534) != 0 || setuid(65534) != 0) std::_Exit(2);
        const absl::Status status = NvmeTier::Open(options, {}).status();
        std::_Exit(absl::IsPermissionDenied(status) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(NvmeTierTest, BudgetBeyondFreeSpaceIsResourceExhausted) {
  NvmeOptions options = Options(1, 0);
  struct statvfs vfs;
  ASSERT_EQ(statvfs(options.directories[0].c_str(), &vfs), 0);
  options.budget_bytes =
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize + (uint64_t{1} << 40);
  const absl::Status status = NvmeTier::Open(options, {}).status();
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_NE(status.message().find(options.directories[0]), std::string::npos);
  EXPECT_NE(status.message().find("--nvme-budget"), std::string::npos);
  EXPECT_TRUE(IsEmptyDirectory(options.directories[0]));
}

TEST_F(NvmeTierTest, SwapFilesAreInvisibleAndPreallocated) {
  NvmeOptions options = Options(2, 4 * kKiB * kKiB);
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier = NvmeTier::Open(options, {});
  ASSERT_TRUE(tier.ok()) << tier.status();
  for (const std::string& dir : options.directories) {
    EXPECT_TRUE(IsEmptyDirectory(dir)) << dir;
  }
  const std::vector<std::string> files = (*tier)->DescribeFiles();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], options.directories[0] + " (2097152 bytes)");
  EXPECT_EQ((*tier)->capacity_bytes(), 4 * kKiB * kKiB);
  EXPECT_EQ((*tier)->block_size_bytes(), kBlock);
}

TEST_F(NvmeTierTest, EnvironmentSelectsThreadPool) {
  ScopedEnv env("STRATA_IO_ENGINE", "threads");
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(Options(2, kKiB * kKiB), {});
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ((*tier)->engine_name(), "thread-pool");
  EXPECT_NE((*tier)->fallback_reason().find("STRATA_IO_ENGINE"),
            std::string::npos);
  AlignedBuffer buf = Allocate(kBlock * 2);
  FillPattern(buf.get(), kBlock * 2, 5);
  ASSERT_TRUE((*tier)->Write(kBlock, buf.get(), kBlock * 2).ok());
  std::memset(buf.get(), 0, kBlock * 2);
  ASSERT_TRUE((*tier)->Read(kBlock, buf.get(), kBlock * 2).ok());
  EXPECT_TRUE(MatchesPattern(buf.get(), kBlock * 2, 5));
}

TEST_F(NvmeTierTest, UnknownEnvironmentEngineIsInvalid) {
  ScopedEnv env("STRATA_IO_ENGINE", "spdk");
  EXPECT_TRUE(absl::IsInvalidArgument(
      NvmeTier::Open(Options(1, kKiB * kKiB), {}).status()));
}

TEST_F(NvmeTierTest, AutoPicksIoUringWhereAvailable) {
  ScopedEnv env("STRATA_IO_ENGINE", "auto");
  absl::StatusOr<std::unique_ptr<BlockIo>> probe = OpenUringBlockIo({}, 1, {});
  if (!probe.ok()) GTEST_SKIP() << "io_uring unavailable: " << probe.status();
  AlignedBuffer buf = Allocate(kKiB * kKiB);
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(Options(1, kKiB * kKiB), {iovec{buf.get(), kKiB * kKiB}});
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ((*tier)->engine_name(), "io_uring");
  EXPECT_EQ((*tier)->fallback_reason(), "");
  FillPattern(buf.get(), kKiB * kKiB, 9);
  ASSERT_TRUE((*tier)->Write(0, buf.get(), kKiB * kKiB).ok());
  std::memset(buf.get(), 0, kKiB * kKiB);
  ASSERT_TRUE((*tier)->Read(0, buf.get(), kKiB * kKiB).ok());
  EXPECT_TRUE(MatchesPattern(buf.get(), kKiB * kKiB, 9));
}

// Opens two tiers under kAuto in a process that cannot open the ring's fd
// (RLIMIT_NOFILE), with stderr captured in a file. Returns 0 if both fell
// back to the thread pool, saying so on stderr exactly once.
int OpenTwiceWithoutIoUring(const NvmeOptions& options,
                            const std::string& log) {
  const int log_fd = open(log.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (log_fd < 0 || dup2(log_fd, STDERR_FILENO) < 0) return 2;
  close(log_fd);
  int lowest_free = 0;
  while (fcntl(lowest_free, F_GETFD) != -1) ++lowest_free;
  const rlimit limit{static_cast<rlim_t>(lowest_free) + 1,
                     static_cast<rlim_t>(lowest_free) + 1};
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 3;
  for (int i = 0; i < 2; ++i) {  // one swap file fits; the ring's fd not
    absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
        NvmeTier::Open(options, {});
    if (!tier.ok() || (*tier)->engine_name() != "thread-pool") return 4;
    if ((*tier)->fallback_reason().find("io_uring_queue_init") ==
        std::string::npos) {
      return 5;
    }
  }
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string notice = "strata: io_uring unavailable (";
  const size_t first = text.find(notice);
  if (first == std::string::npos) return 6;
  if (text.find(notice, first + 1) != std::string::npos) return 7;
  return text.find("using the pread/pwrite thread pool") == std::string::npos
             ? 8
             : 0;
}

TEST_F(NvmeTierTest, AutoFallsBackToThreadPoolWithOneNotice) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the one-spare-fd limit this test sets also starves "
                  "AddressSanitizer's own file use; runs in the default build";
#endif
  ScopedEnv env("STRATA_IO_ENGINE", "auto");
  absl::StatusOr<std::unique_ptr<BlockIo>> probe = OpenUringBlockIo({}, 1, {});
  if (!probe.ok()) {
    GTEST_SKIP() << "io_uring unavailable, so every test already falls back: "
                 << probe.status();
  }
  probe->reset();
  const NvmeOptions options = Options(1, kKiB * kKiB);
  const std::string log = root_.path() + "/stderr.log";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-exec, no fork
  EXPECT_EXIT(std::_Exit(OpenTwiceWithoutIoUring(options, log)),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(NvmeTierTest, WrapperSeesEveryRequest) {
  FaultyBlockIo* faulty = nullptr;
  auto wrap = [&faulty](std::unique_ptr<BlockIo> io) {
    auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
    faulty = f.get();
    return std::unique_ptr<BlockIo>(std::move(f));
  };
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(Options(2, kKiB * kKiB), {}, wrap);
  ASSERT_TRUE(tier.ok()) << tier.status();
  EXPECT_EQ((*tier)->engine_name().substr(0, 7), "faulty(");
  AlignedBuffer buf = Allocate(kBlock);
  ASSERT_TRUE((*tier)->Write(0, buf.get(), kBlock).ok());
  faulty->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kEio});
  EXPECT_TRUE(absl::IsUnavailable((*tier)->Read(0, buf.get(), kBlock)));
  // The retries run in front of the wrapper: they see its faults too.
  EXPECT_EQ(faulty->injected(), NvmeOptions().io_attempts);
  EXPECT_EQ((*tier)->io_retries(), NvmeOptions().io_attempts - 1);
}

// ENOSPC during a write is a full disk, told apart from a full tier by a
// message that names the directory of the file written to.
TEST_F(NvmeTierTest, FullDiskNamesTheDirectory) {
  FaultyBlockIo* faulty = nullptr;
  auto wrap = [&faulty](std::unique_ptr<BlockIo> io) {
    auto f = std::make_unique<FaultyBlockIo>(std::move(io), FaultSpec{});
    faulty = f.get();
    return std::unique_ptr<BlockIo>(std::move(f));
  };
  const NvmeOptions options = Options(2, kKiB * kKiB);
  absl::StatusOr<std::unique_ptr<NvmeTier>> tier =
      NvmeTier::Open(options, {}, wrap);
  ASSERT_TRUE(tier.ok()) << tier.status();
  AlignedBuffer buf = Allocate(kBlock);
  faulty->set_spec(FaultSpec{.rate = 1.0, .kind = FaultKind::kEnospc});
  // Block 1 lies in the second file (striping), so in the second directory.
  const absl::Status status = (*tier)->Write(kBlock, buf.get(), kBlock);
  EXPECT_TRUE(absl::IsResourceExhausted(status)) << status;
  EXPECT_NE(status.message().find("NVMe directory '" + options.directories[1] +
                                  "' is on a full disk"),
            std::string::npos)
      << status;
  EXPECT_EQ(status.message().find(options.directories[0]), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("lower --nvme-budget"), std::string::npos)
      << status;
  EXPECT_EQ(status.message().find("tier full"), std::string::npos) << status;
}

}  // namespace
}  // namespace strata
