// store_roundtrip_bench: store round-trip throughput per tier next to raw
// memcpy and raw io_uring on the same sizes, so the store's overhead shows as
// a ratio.
//
// Every case moves `size` bytes per iteration (64 KiB, 1 MiB, 16 MiB; the
// store cases also 1 MiB + 3) for a fixed iteration count (1 GiB per memory
// case, 256 MiB per NVMe case, at least 16 iterations) and reports
// bytes_per_second (GB/s below are 1e9 bytes/s). Each store case opens its own
// store on the simulated device (device memory is host memory, H2D/D2H are
// memcpy on copy-engine threads): device 64 MiB, host 64 MiB, NVMe 256 MiB in a
// private mkdtemp directory under /var/tmp (removed at exit), 1 MiB blocks,
// queue depth 32, io_uring.
//
// Baselines, same process and run, on host buffers mapped like the store's
// host arena (2 MiB-aligned anonymous mmap, MADV_HUGEPAGE, pre-faulted):
//   memcpy/N            memcpy between two such buffers.
//   memcpy_rt/N         memcpy A->B then B->A (one round trip per iteration).
//   uring_write/N       liburing directly (not the store's engine): O_DIRECT
//   uring_read/N        file in the same directory, fallocate'd; 1 MiB
//   uring_write_read/N  requests (or the whole size if smaller), all
//                       submitted at once on a depth-32 ring, all reaped; a
//                       short or failed request fails the case. File and
//                       buffer are registered as the store's engine does
//                       (the label says if it fell back to plain ops).
//                       write_read writes the buffer, then reads it back.
// Store cases (baseline in brackets):
//   store_h2d         home host: Acquire(kDevice, kRead), release,
//                     Evict(kHost) drops the clean device copy.     [memcpy]
//   store_d2h         home host: Acquire(kDevice, kOverwrite) (no load),
//                     release, Evict(kHost) writes back D2H.        [memcpy]
//   store_dev_rt      home host: Acquire(kDevice, kWrite) loads H2D, release,
//                     Evict(kHost) writes back D2H.              [memcpy_rt]
//   store_nvme_write  home NVMe: Acquire(kHost, kOverwrite) (no load),
//                     release, Evict(kNvme) writes back + checksum.
//                                                             [uring_write]
//   store_nvme_read   home NVMe: Acquire(kHost, kRead) reads + verifies the
//                     checksum, release, Evict(kNvme) drops it.  [uring_read]
//   store_nvme_rmw    home NVMe: Acquire(kHost, kWrite) reads, release,
//                     Evict(kNvme) writes back.            [uring_write_read]
//   store_nvme_to_dev home NVMe, no host copy: Acquire(kDevice, kRead) goes
//                     NVMe -> bounce buffers -> device, release,
//                     Evict(kNvme) drops it.                     [uring_read]
// kWrite loads the current contents before granting the lease, so a
// kWrite + write-back iteration is a round trip (read and write); the pure
// write cases use kOverwrite. Every case warms up once outside the timing and
// checks its data once afterwards (store->Read against the pattern written);
// a failed Status or wrong bytes fail the case with SkipWithError. The odd
// size's io_uring baselines run at the size rounded up to 4 KiB (O_DIRECT).
//
// At the end a table pairs each store case with its baseline: store GB/s,
// baseline GB/s and the ratio store/baseline.
//
// Run:
//   cmake --build build/bench --target store_roundtrip_bench
//   build/bench/bench/store_roundtrip_bench [--json=FILE] [benchmark flags]
// --json=FILE writes the ratio table as JSON; the usual Google Benchmark flags
// (--benchmark_filter=store_nvme, --benchmark_out=...) work as well.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "strata/store.h"

namespace strata {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kHuge = 2 * kMiB;
constexpr uint64_t kRequestBytes = 1 * kMiB;
constexpr unsigned kQueueDepth = 32;
constexpr uint64_t kOddSize = 1 * kMiB + 3;
// Bytes each case moves in its timed loop (at least kMinIterations): memory
// cases are fast and noisy, NVMe cases slow.
constexpr uint64_t kMemoryBytesPerCase = 1 * kGiB;
constexpr uint64_t kNvmeBytesPerCase = 256 * kMiB;
constexpr int64_t kMinIterations = 16;

std::string g_dir;  // the private temp directory (store files, raw file)

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// A pre-faulted host buffer mapped like the store's host arena: anonymous
// mmap at a 2 MiB-aligned address (so 4 KiB-aligned too) with
// MADV_HUGEPAGE. Without huge pages a 1 MiB O_DIRECT request spans 256 pages,
// more segments than a virtio disk takes in one request, and the baseline
// would be slower than the store for that reason alone.
struct AlignedBuffer {
  explicit AlignedBuffer(uint64_t bytes)
      : size(bytes), mapped(RoundUp(std::max<uint64_t>(bytes, 1), kHuge)) {
    void* raw = mmap(nullptr, mapped + kHuge, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
      std::perror("mmap");
      std::abort();
    }
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = RoundUp(start, kHuge);
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t tail = start + mapped + kHuge - (aligned + mapped);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + mapped), tail);
    data = reinterpret_cast<unsigned char*>(aligned);
    madvise(data, mapped, MADV_HUGEPAGE);  // best effort
    std::memset(data, 0, mapped);
  }
  ~AlignedBuffer() { munmap(data, mapped); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint64_t size;
  uint64_t mapped;
  unsigned char* data;
};

bool MatchesPattern(const void* p, uint64_t n, uint64_t seed) {
  AlignedBuffer want(n);
  FillSplitMix64(want.data, n, seed);
  return std::memcmp(p, want.data, n) == 0;
}

int64_t IterationsFor(uint64_t size, uint64_t bytes_per_case) {
  return std::max<int64_t>(kMinIterations,
                           static_cast<int64_t>(bytes_per_case / size));
}

void Finish(benchmark::State& state, uint64_t size) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}

// ---------------------------------------------------------------- memcpy

void BM_Memcpy(benchmark::State& state, uint64_t size) {
  AlignedBuffer a(size), b(size);
  FillSplitMix64(a.data, size, 1);
  std::memcpy(b.data, a.data, size);  // warm-up
  for (auto _ : state) {
    std::memcpy(b.data, a.data, size);
    benchmark::DoNotOptimize(b.data);
    benchmark::ClobberMemory();
  }
  if (!MatchesPattern(b.data, size, 1)) {
    state.SkipWithError("memcpy: destination does not match the source");
  }
  Finish(state, size);
}

void BM_MemcpyRoundTrip(benchmark::State& state, uint64_t size) {
  AlignedBuffer a(size), b(size);
  FillSplitMix64(a.data, size, 2);
  std::memcpy(b.data, a.data, size);  // warm-up
  for (auto _ : state) {
    std::memcpy(b.data, a.data, size);
    benchmark::ClobberMemory();
    std::memcpy(a.data, b.data, size);
    benchmark::DoNotOptimize(a.data);
    benchmark::ClobberMemory();
  }
  if (!MatchesPattern(a.data, size, 2)) {
    state.SkipWithError("memcpy round trip: bytes changed");
  }
  Finish(state, size);
}

// ---------------------------------------------------------------- io_uring

enum class RawOp { kWrite, kRead, kWriteRead };

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
  std::string Open(uint64_t file_bytes, unsigned char* buf, uint64_t bytes) {
    path_ = g_dir + "/raw_uring.dat";
    fd_ = open(path_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_DIRECT | O_CLOEXEC,
               0600);
    if (fd_ < 0) return Errno("open " + path_);
    if (fallocate(fd_, 0, 0, static_cast<off_t>(file_bytes)) != 0) {
      return Errno("fallocate");
    }
    const int rc = io_uring_queue_init(kQueueDepth, &ring_, 0);
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
  // kRequestBytes (or `bytes` if smaller), at most kQueueDepth in flight,
  // all of a batch submitted together; reaps every completion. Empty string
  // on success; a failed or short request is an error.
  std::string Run(bool write, unsigned char* buf, uint64_t bytes) {
    const uint64_t req = std::min(kRequestBytes, bytes);
    uint64_t offset = 0;
    while (offset < bytes) {
      unsigned queued = 0;
      for (; queued < kQueueDepth && offset < bytes; ++queued) {
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

void BM_Uring(benchmark::State& state, uint64_t size, RawOp op) {
  if (size % kAlign != 0) {
    state.SkipWithError("O_DIRECT needs a multiple of 4096 bytes");
    return;
  }
  RawUring raw;
  AlignedBuffer buf(size);
  FillSplitMix64(buf.data, size, 3);
  std::string error = raw.Open(RoundUp(size, kMiB), buf.data, size);
  // Warm-up: put the pattern in the file (the read case reads it back).
  if (error.empty()) error = raw.Run(true, buf.data, size);
  if (error.empty()) error = raw.Run(false, buf.data, size);
  if (!error.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state) {
    if (op != RawOp::kRead) error = raw.Run(true, buf.data, size);
    if (error.empty() && op != RawOp::kWrite) {
      error = raw.Run(false, buf.data, size);
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
  Finish(state, size);
}

// ---------------------------------------------------------------- store

enum class StoreCase {
  kH2D,
  kD2H,
  kDeviceRoundTrip,
  kNvmeWrite,
  kNvmeRead,
  kNvmeReadModifyWrite,
  kNvmeToDevice,
};

StoreOptions BenchStoreOptions() {
  StoreOptions o;
  o.device.backend = DeviceBackendKind::kSimulated;
  o.device.budget_bytes = 64 * kMiB;
  o.host.budget_bytes = 64 * kMiB;
  o.host.lock_memory = false;
  o.nvme.directories = {g_dir};
  o.nvme.budget_bytes = 256 * kMiB;
  o.nvme.block_size_bytes = 1 * kMiB;
  o.nvme.queue_depth = kQueueDepth;
  o.nvme.engine = IoEngine::kIoUring;
  return o;
}

// One store, one tensor, and the per-iteration step of a case.
class StoreBench {
 public:
  StoreBench(StoreCase c, uint64_t size) : case_(c), size_(size) {}

  absl::Status Open() {
    absl::StatusOr<std::unique_ptr<Store>> store =
        Store::Open(BenchStoreOptions());
    if (!store.ok()) return store.status();
    store_ = *std::move(store);
    absl::StatusOr<TensorId> id =
        store_->Create({.name = "bench", .size_bytes = size_, .home = home()});
    if (!id.ok()) return id.status();
    id_ = *id;
    AlignedBuffer pattern(size_);
    FillSplitMix64(pattern.data, size_, kSeed);
    absl::Status s = store_->Write(id_, pattern.data, size_);
    if (!s.ok()) return s;
    // NVMe-homed tensors start with only the NVMe copy.
    if (home() == Tier::kNvme) return store_->Evict(id_, Tier::kNvme);
    return absl::OkStatus();
  }

  Tier home() const {
    return case_ == StoreCase::kH2D || case_ == StoreCase::kD2H ||
                   case_ == StoreCase::kDeviceRoundTrip
               ? Tier::kHost
               : Tier::kNvme;
  }

  // One timed iteration: acquire, release, evict.
  absl::Status Step() {
    absl::StatusOr<Lease> lease = store_->Acquire(id_, lease_tier(), access());
    if (!lease.ok()) return lease.status();
    absl::Status s = lease->Release();
    if (!s.ok()) return s;
    return store_->Evict(id_, home());
  }

  // Warm-up iteration with checks the timed loop skips: that the device
  // copy holds the data (the simulated device's memory is host memory) and
  // that NVMe -> device bypasses the host tier.
  absl::Status WarmUp() {
    absl::StatusOr<Lease> lease = store_->Acquire(id_, lease_tier(), access());
    if (!lease.ok()) return lease.status();
    absl::Status check;
    if (access() == Access::kRead && lease_tier() == Tier::kDevice &&
        !MatchesPattern(lease->data(), size_, kSeed)) {
      check = absl::DataLossError("the device copy does not hold the pattern");
    }
    if (case_ == StoreCase::kNvmeToDevice) {
      absl::StatusOr<Residency> r = store_->GetResidency(id_);
      if (!r.ok()) {
        check = r.status();
      } else if (r->tiers[static_cast<int>(Tier::kHost)] !=
                 Residency::State::kAbsent) {
        check = absl::InternalError("NVMe -> device made a host copy");
      }
    }
    absl::Status s = lease->Release();
    if (!check.ok()) return check;
    if (!s.ok()) return s;
    return store_->Evict(id_, home());
  }

  // After timing: for the kOverwrite cases (whose timed bytes are undefined
  // by contract) one more write-back of a fresh pattern written into the
  // lease; then store->Read must return the expected pattern.
  absl::Status Verify() {
    uint64_t seed = kSeed;
    if (access() == Access::kOverwrite) {
      seed = kSeed + 1;
      absl::StatusOr<Lease> lease =
          store_->Acquire(id_, lease_tier(), Access::kOverwrite);
      if (!lease.ok()) return lease.status();
      FillSplitMix64(lease->data(), size_, seed);  // host memory on sim device
      absl::Status s = lease->Release();
      if (!s.ok()) return s;
      s = store_->Evict(id_, home());
      if (!s.ok()) return s;
    }
    AlignedBuffer got(size_);
    absl::Status s = store_->Read(id_, got.data, size_);
    if (!s.ok()) return s;
    if (!MatchesPattern(got.data, size_, seed)) {
      return absl::DataLossError("store->Read does not return the pattern");
    }
    return absl::OkStatus();
  }

  std::string Label() const {
    const Stats stats = store_->GetStats();
    return absl::StrFormat("%s/%s", stats.device_backend, stats.io_engine);
  }

 private:
  static constexpr uint64_t kSeed = 42;

  Tier lease_tier() const {
    switch (case_) {
      case StoreCase::kNvmeWrite:
      case StoreCase::kNvmeRead:
      case StoreCase::kNvmeReadModifyWrite:
        return Tier::kHost;
      default:
        return Tier::kDevice;
    }
  }

  Access access() const {
    switch (case_) {
      case StoreCase::kD2H:
      case StoreCase::kNvmeWrite:
        return Access::kOverwrite;
      case StoreCase::kDeviceRoundTrip:
      case StoreCase::kNvmeReadModifyWrite:
        return Access::kWrite;
      default:
        return Access::kRead;
    }
  }

  StoreCase case_;
  uint64_t size_;
  std::unique_ptr<Store> store_;
  TensorId id_;
};

void Fail(benchmark::State& state, const absl::Status& s) {
  const std::string msg = s.ToString();
  state.SkipWithError(msg.c_str());
}

void BM_Store(benchmark::State& state, uint64_t size, StoreCase c) {
  StoreBench bench(c, size);
  absl::Status s = bench.Open();
  if (s.ok()) s = bench.WarmUp();
  if (!s.ok()) {
    Fail(state, s);
    return;
  }
  for (auto _ : state) {
    s = bench.Step();
    if (!s.ok()) {
      Fail(state, s);
      break;
    }
  }
  if (!s.ok()) return;
  s = bench.Verify();
  if (!s.ok()) {
    Fail(state, s);
    return;
  }
  state.SetLabel(bench.Label());
  Finish(state, size);
}

// ---------------------------------------------------------------- registry

struct Pairing {
  const char* store;
  const char* baseline;
};

constexpr Pairing kPairings[] = {
    {"store_h2d", "memcpy"},
    {"store_d2h", "memcpy"},
    {"store_dev_rt", "memcpy_rt"},
    {"store_nvme_write", "uring_write"},
    {"store_nvme_read", "uring_read"},
    {"store_nvme_rmw", "uring_write_read"},
    {"store_nvme_to_dev", "uring_read"},
};

bool IsUring(const std::string& name) { return name.rfind("uring_", 0) == 0; }

// The size a baseline runs at for a store case of `size` bytes.
uint64_t BaselineSize(const std::string& baseline, uint64_t size) {
  return IsUring(baseline) ? RoundUp(size, kAlign) : size;
}

void RegisterAll() {
  const std::vector<uint64_t> sizes = {64 * kKiB, 1 * kMiB, 16 * kMiB};
  std::vector<uint64_t> store_sizes = sizes;
  store_sizes.insert(store_sizes.begin() + 2, kOddSize);

  using Fn = std::function<void(benchmark::State&, uint64_t)>;
  auto add = [](const std::string& name, uint64_t size, Fn fn) {
    const bool nvme = name.find("uring") != std::string::npos ||
                      name.find("nvme") != std::string::npos;
    benchmark::RegisterBenchmark(
        name.c_str(), [fn, size](benchmark::State& st) { fn(st, size); })
        ->Arg(static_cast<int64_t>(size))
        ->Iterations(
            IterationsFor(size, nvme ? kNvmeBytesPerCase : kMemoryBytesPerCase))
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  };

  // Baselines at every size a store case needs.
  std::vector<uint64_t> memcpy_sizes = store_sizes;
  std::vector<uint64_t> uring_sizes;
  for (uint64_t s : store_sizes) uring_sizes.push_back(RoundUp(s, kAlign));
  for (uint64_t s : memcpy_sizes) add("memcpy", s, BM_Memcpy);
  for (uint64_t s : memcpy_sizes) add("memcpy_rt", s, BM_MemcpyRoundTrip);
  const std::pair<const char*, RawOp> raw[] = {
      {"uring_write", RawOp::kWrite},
      {"uring_read", RawOp::kRead},
      {"uring_write_read", RawOp::kWriteRead}};
  for (const auto& [name, op] : raw) {
    for (uint64_t s : uring_sizes) {
      add(name, s,
          [op](benchmark::State& st, uint64_t n) { BM_Uring(st, n, op); });
    }
  }

  const std::pair<const char*, StoreCase> cases[] = {
      {"store_h2d", StoreCase::kH2D},
      {"store_d2h", StoreCase::kD2H},
      {"store_dev_rt", StoreCase::kDeviceRoundTrip},
      {"store_nvme_write", StoreCase::kNvmeWrite},
      {"store_nvme_read", StoreCase::kNvmeRead},
      {"store_nvme_rmw", StoreCase::kNvmeReadModifyWrite},
      {"store_nvme_to_dev", StoreCase::kNvmeToDevice}};
  for (const auto& [name, c] : cases) {
    for (uint64_t s : store_sizes) {
      add(name, s,
          [c](benchmark::State& st, uint64_t n) { BM_Store(st, n, c); });
    }
  }
}

// ---------------------------------------------------------------- reporting

// Console output as usual, plus each run's bytes/s by (name, size).
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  explicit RecordingReporter(OutputOptions options)
      : ConsoleReporter(options) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With --benchmark_repetitions the median wins over single runs.
    for (const Run& run : runs) {
      const bool median =
          run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.error_occurred ||
          (run.run_type != Run::RT_Iteration && !median)) {
        continue;
      }
      auto it = run.counters.find("bytes_per_second");
      if (it == run.counters.end()) continue;
      const std::pair<std::string, uint64_t> key = {
          run.run_name.function_name,
          std::strtoull(run.run_name.args.c_str(), nullptr, 10)};
      if (!median && medians_.contains(key)) continue;
      if (median) medians_.insert(key);
      results_[key] = it->second.value;
    }
  }

  // Bytes per second, or a negative value when the case did not run.
  double Get(const std::string& name, uint64_t size) const {
    auto it = results_.find({name, size});
    return it == results_.end() ? -1 : it->second;
  }

 private:
  std::map<std::pair<std::string, uint64_t>, double> results_;
  std::set<std::pair<std::string, uint64_t>> medians_;
};

std::string SizeName(uint64_t n) {
  if (n % kMiB == 0) return absl::StrFormat("%d MiB", n / kMiB);
  if (n > kMiB) return absl::StrFormat("1 MiB+%d", n - kMiB);
  if (n % kKiB == 0) return absl::StrFormat("%d KiB", n / kKiB);
  return absl::StrFormat("%d B", n);
}

nlohmann::json PrintRatioTable(const RecordingReporter& reporter) {
  nlohmann::json rows = nlohmann::json::array();
  std::printf("\nstore round trip vs baseline (GB/s = 1e9 bytes/s)\n");
  std::printf("%-18s %-11s %10s  %-28s %10s %8s\n", "case", "size",
              "store GB/s", "baseline", "base GB/s", "ratio");
  const std::vector<uint64_t> sizes = {64 * kKiB, 1 * kMiB, kOddSize,
                                       16 * kMiB};
  for (const Pairing& p : kPairings) {
    for (uint64_t size : sizes) {
      const double store = reporter.Get(p.store, size);
      if (store < 0) continue;  // filtered out or failed
      const uint64_t base_size = BaselineSize(p.baseline, size);
      const double base = reporter.Get(p.baseline, base_size);
      const std::string base_name =
          absl::StrFormat("%s/%d", p.baseline, base_size);
      const double ratio = base > 0 ? store / base : 0;
      std::printf("%-18s %-11s %10.2f  %-28s %10s %8s\n", p.store,
                  SizeName(size).c_str(), store / 1e9, base_name.c_str(),
                  base > 0 ? absl::StrFormat("%.2f", base / 1e9).c_str() : "-",
                  base > 0 ? absl::StrFormat("%.3f", ratio).c_str() : "-");
      nlohmann::json row = {{"case", p.store},
                            {"size_bytes", size},
                            {"store_gbps", store / 1e9},
                            {"baseline", p.baseline},
                            {"baseline_size_bytes", base_size}};
      if (base > 0) {
        row["baseline_gbps"] = base / 1e9;
        row["ratio"] = ratio;
      } else {
        row["baseline_gbps"] = nullptr;
        row["ratio"] = nullptr;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  // Take --json=FILE (or --json FILE) out before benchmark sees the flags.
  std::string json_path;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--json=", 0) == 0) {
      json_path = a.substr(7);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      args.push_back(argv[i]);
    }
  }
  int bench_argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) {
    return 2;
  }

  std::string tmpl = "/var/tmp/strata-bench-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "mkdtemp %s: %s\n", tmpl.c_str(), strerror(errno));
    return 1;
  }
  strata::g_dir = tmpl;
  struct RemoveDir {
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(strata::g_dir, ec);
    }
  } remove_dir;

  strata::RegisterAll();
  int options = benchmark::ConsoleReporter::OO_Tabular;
  if (isatty(STDOUT_FILENO)) options |= benchmark::ConsoleReporter::OO_Color;
  strata::RecordingReporter reporter(
      static_cast<benchmark::ConsoleReporter::OutputOptions>(options));
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  nlohmann::json rows = strata::PrintRatioTable(reporter);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << nlohmann::json{{"benchmark", "store_roundtrip_bench"},
                          {"rows", rows}}
               .dump(2)
        << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
