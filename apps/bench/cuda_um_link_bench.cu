// cuda_um_link_bench.cu: RunUnifiedLinkBench on a real GPU (see
// um_link_bench.h). Built only with CUDA.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "apps/bench/um_link_bench.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "tiers/device/device_backend.h"

namespace strata {
namespace {

// Reads every 16-byte word of `p` (grid-stride) so each page is touched:
// first-touch faults migrate it to the device. The xor keeps the loads live.
__global__ void StreamRead(const uint4* p, uint64_t words, unsigned* sink) {
  unsigned acc = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < words;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // practically never: no store traffic
}

cudaMemLocation Where(bool device, int ordinal) {
  cudaMemLocation loc{};
  loc.type = device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  loc.id = device ? ordinal : 0;
  return loc;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Owns the buffers, stream and events of one run; frees them on exit.
class UmBench {
 public:
  explicit UmBench(const UnifiedLinkBenchConfig& c) : c_(c) {}
  ~UmBench() {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (managed_ != nullptr) cudaFree(managed_);
    if (device_ != nullptr) cudaFree(device_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (sink_ != nullptr) cudaFree(sink_);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaGetLastError();
  }

  absl::Status Init(std::string* name, bool* batched) {
    STRATA_CUDA_RETURN_IF_ERROR(cudaSetDevice(c_.cuda_device));
    cudaDeviceProp prop{};
    STRATA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, c_.cuda_device));
    *name = absl::StrCat("cuda:", prop.name);
    int concurrent = 0;
    STRATA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
        &concurrent, cudaDevAttrConcurrentManagedAccess, c_.cuda_device));
    *batched = concurrent != 0;
    size_t free_bytes = 0, total_bytes = 0;
    STRATA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    STRATA_RETURN_IF_ERROR(
        CheckManagedFits(c_.bytes, {free_bytes, total_bytes}, prop.name));
    STRATA_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRATA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_));
    STRATA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_));
    STRATA_CUDA_RETURN_IF_ERROR(cudaMalloc(&sink_, sizeof(unsigned)));
    STRATA_CUDA_RETURN_IF_ERROR(
        cudaMallocManaged(&managed_, c_.bytes, cudaMemAttachGlobal));
    Fill();
    return absl::OkStatus();
  }

  // Median GB/s of `samples` runs of `op` (after one warm-up), each after
  // `setup` (untimed) and bracketed by events on the stream.
  absl::StatusOr<double> Time(const std::function<absl::Status()>& setup,
                              const std::function<absl::Status()>& op) {
    std::vector<double> gbps;
    for (int s = 0; s <= c_.samples; ++s) {
      STRATA_RETURN_IF_ERROR(setup());
      STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      STRATA_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream_));
      STRATA_RETURN_IF_ERROR(op());
      STRATA_CUDA_RETURN_IF_ERROR(cudaEventRecord(stop_, stream_));
      STRATA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop_));
      float ms = 0;
      STRATA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start_, stop_));
      if (s > 0) gbps.push_back(c_.bytes / (ms * 1e-3) / 1e9);  // 0: warm-up
    }
    return Median(gbps);
  }

  absl::Status ToHost() { return Prefetch(false); }
  absl::Status ToDevice() { return Prefetch(true); }
  absl::Status Prefetch(bool to_device) {
    return CudaStatus(
        cudaMemPrefetchAsync(managed_, c_.bytes,
                             Where(to_device, c_.cuda_device), 0, stream_),
        "cudaMemPrefetchAsync");
  }
  absl::Status Touch() {
    StreamRead<<<1024, 256, 0, stream_>>>(static_cast<const uint4*>(managed_),
                                          c_.bytes / sizeof(uint4), sink_);
    return CudaLaunchStatus("StreamRead<<<>>>");
  }
  absl::Status Batch(bool discard) {
    std::vector<void*> ptrs;
    std::vector<size_t> sizes;
    for (uint64_t off = 0; off < c_.bytes; off += c_.chunk_bytes) {
      ptrs.push_back(static_cast<char*>(managed_) + off);
      sizes.push_back(std::min(c_.chunk_bytes, c_.bytes - off));
    }
    cudaMemLocation loc = Where(true, c_.cuda_device);
    size_t first = 0;
    if (discard) {
      return CudaStatus(cudaMemDiscardAndPrefetchBatchAsync(
                            ptrs.data(), sizes.data(), ptrs.size(), &loc,
                            &first, 1, 0, stream_),
                        "cudaMemDiscardAndPrefetchBatchAsync");
    }
    return CudaStatus(
        cudaMemPrefetchBatchAsync(ptrs.data(), sizes.data(), ptrs.size(), &loc,
                                  &first, 1, 0, stream_),
        "cudaMemPrefetchBatchAsync");
  }
  absl::Status PinnedCopy() {
    if (pinned_ == nullptr) {
      STRATA_CUDA_RETURN_IF_ERROR(cudaMallocHost(&pinned_, c_.bytes));
      STRATA_CUDA_RETURN_IF_ERROR(cudaMalloc(&device_, c_.bytes));
      std::memset(pinned_, 0x5a, c_.bytes);
    }
    return CudaStatus(cudaMemcpyAsync(device_, pinned_, c_.bytes,
                                      cudaMemcpyHostToDevice, stream_),
                      "cudaMemcpyAsync");
  }

  // The buffer holds its index pattern (checked on the host).
  void Fill() {
    auto* words = static_cast<uint64_t*>(managed_);
    for (uint64_t i = 0; i < c_.bytes / 8; ++i)
      words[i] = i * 0x9e3779b97f4a7c15ull;
  }
  absl::StatusOr<uint64_t> Verify() {
    STRATA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    const auto* words = static_cast<const uint64_t*>(managed_);
    for (uint64_t i = 0; i < c_.bytes / 8; ++i) {
      if (words[i] != i * 0x9e3779b97f4a7c15ull) {
        return absl::DataLossError(absl::StrCat("managed buffer word ", i,
                                                " changed across prefetches"));
      }
    }
    return c_.bytes / 8 * 8;
  }

 private:
  const UnifiedLinkBenchConfig& c_;
  void* managed_ = nullptr;
  void* device_ = nullptr;
  void* pinned_ = nullptr;
  unsigned* sink_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace

absl::StatusOr<UnifiedLinkBenchResult> RunUnifiedLinkBench(
    const UnifiedLinkBenchConfig& c) {
  if (c.bytes == 0 || c.chunk_bytes == 0 || c.samples < 3) {
    return absl::InvalidArgumentError(
        "link-um needs a buffer and chunk size > 0 and at least 3 samples");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= c.cuda_device) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", c.cuda_device, " answers"));
  }
  UmBench bench(c);
  UnifiedLinkBenchResult r;
  r.bytes = c.bytes;
  STRATA_RETURN_IF_ERROR(bench.Init(&r.device, &r.batched));
  auto say = [&](const char* what) {
    if (c.progress) c.progress(what);
  };
  auto to_host = [&] { return bench.ToHost(); };
  auto to_device = [&] { return bench.ToDevice(); };
  say("first-touch faults");
  STRATA_ASSIGN_OR_RETURN(r.fault_gbps,
                          bench.Time(to_host, [&] { return bench.Touch(); }));
  say("cudaMemPrefetchAsync");
  STRATA_ASSIGN_OR_RETURN(r.prefetch_gbps, bench.Time(to_host, to_device));
  if (r.batched) {
    say("cudaMemPrefetchBatchAsync");
    STRATA_ASSIGN_OR_RETURN(r.batch_prefetch_gbps, bench.Time(to_host, [&] {
      return bench.Batch(false);
    }));
  }
  say("prefetch to host (eviction)");
  STRATA_ASSIGN_OR_RETURN(r.evict_gbps, bench.Time(to_device, to_host));
  STRATA_ASSIGN_OR_RETURN(r.verified_bytes, bench.Verify());
  if (r.batched) {
    say("cudaMemDiscardAndPrefetchBatchAsync");
    STRATA_ASSIGN_OR_RETURN(r.discard_prefetch_gbps, bench.Time(to_host, [&] {
      return bench.Batch(true);
    }));
  }
  say("pinned cudaMemcpyAsync");
  auto nothing = [] { return absl::OkStatus(); };
  STRATA_ASSIGN_OR_RETURN(r.pinned_copy_gbps, bench.Time(nothing, [&] {
    return bench.PinnedCopy();
  }));
  return r;
}

}  // namespace strata
