// cuda_managed.cc: CudaDevice's unified memory (policy in cuda_device.h):
// the one cudaMallocManaged, prefetch hints to a cudaMemLocation (CUDA 13
// signatures), batched where every GPU has concurrent managed access,
// discards and advice. Built only with CUDA, like cuda_device.cc.
#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "tiers/device/cuda_device.h"

namespace strata {
namespace {

cudaMemLocation Location(MemLocation to, int ordinal) {
  cudaMemLocation location{};
  if (to == MemLocation::kDevice) {
    location.type = cudaMemLocationTypeDevice;
    location.id = ordinal;
  } else {
    location.type = cudaMemLocationTypeHost;
    location.id = 0;  // ignored for the host
  }
  return location;
}

// The ranges as the batch calls take them: parallel pointer and size arrays.
struct BatchArrays {
  explicit BatchArrays(absl::Span<const ManagedRange> ranges) {
    for (const ManagedRange& r : ranges) {
      ptrs.push_back(r.ptr);
      sizes.push_back(r.bytes);
    }
  }
  std::vector<void*> ptrs;
  std::vector<size_t> sizes;
};

// Queues the prefetches of `ranges` to `location` on `stream`. One range: the
// plain call. Several, or a discard (which exists only as a batch call): one
// batch call where every GPU allows it (`batched`), else one plain call per
// range (no discard).
absl::Status IssuePrefetches(absl::Span<const ManagedRange> ranges,
                             cudaMemLocation location, bool discard,
                             bool batched, cudaStream_t stream) {
  if (batched && (ranges.size() > 1 || discard)) {
    BatchArrays batch(ranges);
    size_t first = 0;
    return discard ? CudaStatus(cudaMemDiscardAndPrefetchBatchAsync(
                                    batch.ptrs.data(), batch.sizes.data(),
                                    batch.ptrs.size(), &location, &first, 1, 0,
                                    stream),
                                "cudaMemDiscardAndPrefetchBatchAsync")
                   : CudaStatus(cudaMemPrefetchBatchAsync(
                                    batch.ptrs.data(), batch.sizes.data(),
                                    batch.ptrs.size(), &location, &first, 1, 0,
                                    stream),
                                "cudaMemPrefetchBatchAsync");
  }
  for (const ManagedRange& r : ranges) {
    STRATA_RETURN_IF_ERROR(
        CudaStatus(cudaMemPrefetchAsync(r.ptr, r.bytes, location, 0, stream),
                   "cudaMemPrefetchAsync"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::byte*> CudaDevice::ReserveManaged(uint64_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("managed memory size must be > 0");
  }
  STRATA_RETURN_IF_ERROR(SetDevice());
  {
    MutexLock lock(&mu_);
    if (managed_ != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the managed memory on ", name(), " is already reserved"));
    }
  }
  // Without concurrent managed access the CPU may not touch managed memory
  // while any kernel runs, which the store's host leases would do.
  int concurrent = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &concurrent, cudaDevAttrConcurrentManagedAccess, options_.cuda_device));
  if (concurrent == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        device_name_,
        " lacks concurrent managed access (cudaDevAttrConcurrentManagedAccess "
        "is 0), so host and device cannot share managed memory safely: use "
        "--memory=copies"));
  }
  STRATA_ASSIGN_OR_RETURN(DeviceMemInfo info, GetMemInfo());
  STRATA_RETURN_IF_ERROR(CheckManagedFits(bytes, info, device_name_));
  void* p = nullptr;
  const cudaError_t err = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
  if (err == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cudaMallocManaged of the host budget (", bytes, " bytes) failed on ",
        device_name_, " (", CudaErrorText(err), "): lower --host-budget"));
  }
  STRATA_RETURN_IF_ERROR(CudaStatus(err, "cudaMallocManaged"));
  MutexLock lock(&mu_);
  managed_ = p;
  return static_cast<std::byte*>(p);
}

absl::Status CudaDevice::PrefetchManaged(absl::Span<const ManagedRange> ranges,
                                         MemLocation to, bool discard,
                                         DeviceEvent* after) {
  if (ranges.empty()) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  cudaStream_t stream = to == MemLocation::kDevice ? h2d_stream_ : d2h_stream_;
  STRATA_RETURN_IF_ERROR(StreamAfter(stream, after));
  absl::Status status = IssuePrefetches(
      ranges, Location(to, options_.cuda_device), discard, batched_, stream);
  // Completion: an event after the prefetches, then wait for it.
  if (status.ok()) status = WaitForStream(stream);
  if (!status.ok()) {
    cudaStreamSynchronize(stream);
    cudaGetLastError();
  }
  return status;
}

absl::Status CudaDevice::DiscardManaged(absl::Span<const ManagedRange> ranges) {
  if (ranges.empty() || !batched_) return absl::OkStatus();
  STRATA_RETURN_IF_ERROR(SetDevice());
  BatchArrays batch(ranges);
  // Waited for: a discard still queued when the CPU writes the range anew
  // would wipe those writes.
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaMemDiscardBatchAsync(batch.ptrs.data(), batch.sizes.data(),
                               batch.ptrs.size(), 0, h2d_stream_));
  return WaitForStream(h2d_stream_);
}

absl::Status CudaDevice::AdviseManaged(const ManagedRange& range,
                                       ManagedAdvice advice) {
  STRATA_RETURN_IF_ERROR(SetDevice());
  const cudaMemLocation device =
      Location(MemLocation::kDevice, options_.cuda_device);
  const cudaMemLocation host = Location(MemLocation::kHost, 0);
  switch (advice) {
    case ManagedAdvice::kPreferHostAccessedByDevice:
      STRATA_CUDA_RETURN_IF_ERROR(cudaMemAdvise(
          range.ptr, range.bytes, cudaMemAdviseSetPreferredLocation, host));
      return CudaStatus(cudaMemAdvise(range.ptr, range.bytes,
                                      cudaMemAdviseSetAccessedBy, device),
                        "cudaMemAdvise(SetAccessedBy)");
    case ManagedAdvice::kReadMostly:
      return CudaStatus(cudaMemAdvise(range.ptr, range.bytes,
                                      cudaMemAdviseSetReadMostly, device),
                        "cudaMemAdvise(SetReadMostly)");
    case ManagedAdvice::kUnsetReadMostly:
      return CudaStatus(cudaMemAdvise(range.ptr, range.bytes,
                                      cudaMemAdviseUnsetReadMostly, device),
                        "cudaMemAdvise(UnsetReadMostly)");
  }
  return absl::InvalidArgumentError("unknown managed-memory advice");
}

absl::Status CudaDevice::ServeFault(const ManagedRange& /*range*/,
                                    MemLocation /*to*/) {
  return absl::OkStatus();
}

}  // namespace strata
