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
//   uring_read_touch/N  uring_read, then one load per 64-byte line of what
//   uring_read_xxh3/N   was read, or its XXH3-64 (the store's verification):
//                       diagnostic, not divided by; see "vs verified".
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
// baseline GB/s and the ratio store/baseline; the reads that verify a
// checksum also "vs verified", store / uring_read_xxh3 at that size (JSON:
// verified_baseline_gbps, ratio_to_verified).
//
// Files: this one holds the memcpy baselines, the store cases and main;
// raw_uring_baseline.{h,cc} the io_uring baselines; ratio_report.{h,cc} the
// recording reporter and the ratio table; aligned_buffer.h the buffers.
//
// Run:
//   cmake --build build/bench --target store_roundtrip_bench
//   build/bench/bench/store_roundtrip_bench [--json=FILE] [benchmark flags]
// --json=FILE writes the ratio table as JSON; the usual Google Benchmark flags
// (--benchmark_filter=store_nvme, --benchmark_out=...) work as well.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "bench/aligned_buffer.h"
#include "bench/ratio_report.h"
#include "bench/raw_uring_baseline.h"
#include "strata/store.h"

namespace strata {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kOddSize = 1 * kMiB + 3;
// Bytes each case moves in its timed loop (at least kMinIterations): memory
// cases are fast and noisy, NVMe cases slow.
constexpr uint64_t kMemoryBytesPerCase = 1 * kGiB;
constexpr uint64_t kNvmeBytesPerCase = 256 * kMiB;
constexpr int64_t kMinIterations = 16;

std::string g_dir;  // the private temp directory (store files, raw file)

// The sizes the store cases run at (the baselines run at these too, the
// io_uring ones rounded up for O_DIRECT).
std::vector<uint64_t> StoreSizes() {
  return {64 * kKiB, 1 * kMiB, kOddSize, 16 * kMiB};
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
  o.nvme.queue_depth = kUringQueueDepth;
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

void RegisterAll() {
  const std::vector<uint64_t> store_sizes = StoreSizes();

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
  for (uint64_t s : store_sizes) uring_sizes.push_back(UringBaselineSize(s));
  for (uint64_t s : memcpy_sizes) add("memcpy", s, BM_Memcpy);
  for (uint64_t s : memcpy_sizes) add("memcpy_rt", s, BM_MemcpyRoundTrip);
  const std::pair<const char*, RawOp> raw[] = {
      {"uring_write", RawOp::kWrite},
      {"uring_read", RawOp::kRead},
      {"uring_write_read", RawOp::kWriteRead},
      {"uring_read_touch", RawOp::kReadTouch},
      {"uring_read_xxh3", RawOp::kReadXxh3}};
  for (const auto& [name, op] : raw) {
    for (uint64_t s : uring_sizes) {
      add(name, s, [op](benchmark::State& st, uint64_t n) {
        BM_Uring(st, g_dir, n, op);
      });
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

// ---------------------------------------------------------------- main

// Takes --json=FILE (or --json FILE) out of argv before benchmark sees the
// flags: the path (empty if none), the rest left in `args`.
std::string TakeJsonFlag(int argc, char** argv, std::vector<char*>& args) {
  std::string json_path;
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
  return json_path;
}

// Writes the ratio table's rows to `path`; the exit code.
int WriteJson(const std::string& path, const nlohmann::json& rows) {
  std::ofstream out(path);
  out << nlohmann::json{{"benchmark", "store_roundtrip_bench"}, {"rows", rows}}
             .dump(2)
      << "\n";
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return 1;
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      // Google Benchmark's help (printed next) knows only its own flags.
      std::printf(
          "store_roundtrip_bench [--json=FILE] [benchmark flags]: store round "
          "trips per tier next to raw memcpy and raw io_uring (the file's "
          "top comment says what each case does). NVMe files go in a private "
          "directory under /var/tmp, removed at exit. --json=FILE writes the "
          "ratio table.\n\n");
    }
  }
  std::vector<char*> args;
  const std::string json_path = strata::TakeJsonFlag(argc, argv, args);
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

  nlohmann::json rows = strata::PrintRatioTable(reporter, strata::StoreSizes());
  return json_path.empty() ? 0 : strata::WriteJson(json_path, rows);
}
