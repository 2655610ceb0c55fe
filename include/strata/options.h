// options.h: how to open a Store. One struct per concern; every field says its
// default and unit. Budgets are bytes reserved once at Store::Open.
#ifndef STRATA_OPTIONS_H_
#define STRATA_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// The units each tier allocates in: a tensor takes its size rounded up to its
// tier's granule, and a device budget is rounded up to whole granules. Host
// and NVMe extents are 4 KiB so they can feed O_DIRECT; device extents 256 B,
// cudaMalloc's alignment.
inline constexpr uint64_t kDeviceAllocationGranuleBytes = 256;
inline constexpr uint64_t kHostAllocationGranuleBytes = 4096;
inline constexpr uint64_t kNvmeAllocationGranuleBytes = 4096;

enum class DeviceBackendKind : uint8_t {
  kAuto,       // CUDA when a GPU answers, else the simulated device
  kCuda,       // a real GPU, or Open fails
  kSimulated,  // host memory standing in for the device (tests, planning)
};

// How device-tier copies are made.
enum class DeviceMemory : uint8_t {
  // The device tier is one cudaMalloc; a device copy is a separate extent
  // filled by cudaMemcpyAsync from the host tier (the default).
  kExplicitCopies,
  // Unified memory: the host tier is one managed allocation
  // (cudaMallocManaged) and a tensor's device copy is its host pages
  // migrated to the GPU by prefetch hints (cudaMemPrefetchAsync with a
  // cudaMemLocation), so a lease's pointer is the same on both tiers. The
  // device budget caps the bytes resident on the GPU. Store::Open refuses a
  // host budget above the GPU's free memory less a margin.
  kUnified,
};

struct DeviceOptions {
  // Device tier budget, reserved with one cudaMalloc (or one host allocation
  // on the simulated device). Default: 256 MiB.
  uint64_t budget_bytes = 256 * kMiB;
  // Default: kAuto. Under kAuto, the environment variable
  // STRATA_DEVICE=cuda|simulated picks instead; an explicit choice wins.
  DeviceBackendKind backend = DeviceBackendKind::kAuto;
  // CUDA device ordinal. Default: 0.
  int cuda_device = 0;
  // Simulated device link model: each copy takes at least
  // latency + bytes / (link_gbps * 1e9) seconds. 0 disables the model (copies
  // run at memcpy speed). Default: 0, 0.
  double sim_link_gbps = 0;
  double sim_latency_seconds = 0;
  // Copies are split into chunks of this size so that a large tensor does not
  // hold a copy engine while a small urgent one waits. Default: 4 MiB.
  uint64_t copy_chunk_bytes = 4 * kMiB;
  // Default: kExplicitCopies.
  DeviceMemory memory = DeviceMemory::kExplicitCopies;
  // Unified memory only. true: the store prefetches ahead of use, evicts by
  // prefetching to host, discards dead contents and advises every range
  // (preferred location host, accessed by the device; read-mostly for
  // tensors not written during a step). false: no hints at all; pages move
  // by first-touch faults (the baseline hints are measured against).
  // Default: true.
  bool unified_hints = true;
  // Simulated device only: the GPU memory it reports (cudaMemGetInfo's
  // total), which caps the managed memory of unified-memory mode. 0 = this
  // machine's physical memory, where the simulated device lives.
  // Default: 0.
  uint64_t sim_memory_bytes = 0;
};

struct HostOptions {
  // Pinned host tier budget (mmap'd once; registered with the GPU in chunks of
  // at most 1 GiB when CUDA is in use). Must leave room for the OS: Open
  // refuses budgets above the machine's physical memory. Default: 1 GiB.
  uint64_t budget_bytes = 1 * kGiB;
  // mlock the arena (best effort: a refusal is not an error; DescribeTiers
  // and `strata info` report it). Default: true.
  bool lock_memory = true;
};

enum class IoEngine : uint8_t {
  kAuto,        // io_uring, else the thread pool (said once on stderr)
  kIoUring,     // io_uring or Open fails
  kThreadPool,  // pread/pwrite on a thread pool
};

struct NvmeOptions {
  // Directories for swap files, one file each; several directories stripe
  // across drives. Empty: no NVMe tier. Default: empty.
  std::vector<std::string> directories;
  // Total NVMe tier budget across all directories, preallocated at Open
  // (ResourceExhausted when the file system lacks the space); rounded up so
  // each directory's file is a whole number of blocks. Default: 0.
  uint64_t budget_bytes = 0;
  // I/O requests in flight per ring (io_uring) or threads (pool).
  // Default: 32.
  uint32_t queue_depth = 32;
  // Size of one I/O request and the stripe unit across directories; a
  // multiple of 4096, at most 64 MiB. NVMe<->device transfers also use a
  // fixed set of pinned bounce chunks (4 of max(4 MiB, block size)) reserved
  // at Open on top of the host budget. Default: 1 MiB.
  uint64_t block_size_bytes = 1 * kMiB;
  // Default: kAuto. Under kAuto, the environment variable
  // STRATA_IO_ENGINE=io_uring|threads picks instead; an explicit choice wins.
  IoEngine engine = IoEngine::kAuto;
  // Tries per NVMe request before a transient error (EIO, EAGAIN, a short
  // read or write) reaches the store, with a bounded backoff between them
  // (tiers/nvme/retrying_block_io.h); while > 1, a read whose checksum does
  // not match is also read once more before it counts as DataLoss. 1: no
  // retries (tests of the store's own error paths). Default: 4.
  uint32_t io_attempts = 4;
  // Sleep before the first retry, doubled before each later one (1, 2, 4 ms
  // with the defaults). Default: 0.001 s.
  double io_retry_backoff_seconds = 0.001;
};

enum class EvictionPolicy : uint8_t {
  // The copy whose predicted next use is furthest away (Belady over the
  // learned trace; clean before dirty at equal distance, then LRU). Copies
  // with no predicted use count as furthest. Without a trace this is LRU.
  kBelady,
  kLru,  // least recently used copy first (the baseline)
};

struct SchedulerOptions {
  // After each Acquire, prefetch the accesses the learned trace predicts
  // next, in order (see prefetch_threads). Default: true.
  bool prefetch = true;
  // Bytes the predicted accesses ahead may occupy per tier (those already
  // there count); 0 = automatic: the tier's budget not under a lease.
  // Default: 0.
  uint64_t lookahead_bytes = 0;
  // Which copy a full tier evicts. Flag: --eviction=belady|lru.
  // Default: kBelady.
  EvictionPolicy eviction = EvictionPolicy::kBelady;
  // Prefetches in flight at once (0 to 64), started in the order they were
  // queued; each moves its bytes on its own transfer thread while the
  // scheduler's executor thread goes on. With one, prefetches run in trace
  // order, so the nearest predicted access gets the link first; a fixed
  // number above one makes large loads share a link (measured: `strata bench
  // -t scheduler` hit rate 0.98-0.996 with 2, 1.000 with 1). 0 = automatic:
  // one at a time, except that small ones run together while the bytes in
  // flight fit in one I/O block (NvmeOptions::block_size_bytes): a run of
  // small tensors then pays one device latency, not one each, and a tensor
  // of a block or more never shares the link with a farther one.
  // Default: 0.
  int prefetch_threads = 0;
  // With prefetch on: once a step's trace is learned, follow a residency
  // plan of the whole step (scheduler/residency_plan.h: which tier holds
  // each tensor when, every load, write-back and drop with its latest
  // start) and prefetch reactively only where no plan exists. False: the
  // reactive prefetch and Belady eviction alone (for comparison).
  // Flag: --scheduler=planned|reactive. Default: true.
  bool planned = true;
};

struct StoreOptions {
  DeviceOptions device;
  HostOptions host;
  NvmeOptions nvme;
  SchedulerOptions scheduler;
  // Record every transfer and lease span for Store::WriteTimeline (Chrome
  // trace-event JSON). Costs a little memory per span. Default: false.
  bool timeline = false;
};

}  // namespace strata

#endif  // STRATA_OPTIONS_H_
