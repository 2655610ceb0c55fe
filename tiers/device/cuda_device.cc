// cuda_device.cc: CudaDevice and ProbeCudaDevice over the CUDA runtime API
// (policy in cuda_device.h): opening the device, the arena, copies, events
// and host registration. Unified memory is in cuda_managed.cc. Plain C++
// compiled by the host compiler and linked with the static CUDA runtime,
// which loads the driver at run time: with no driver, every call returns an
// error instead of failing to link.
#include "tiers/device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/cuda_status.h"
#include "strata/status.h"

namespace strata {
namespace {

constexpr uint64_t kRegisterChunkBytes = uint64_t{1} << 30;  // 1 GiB
constexpr uint64_t kPageBytes = 4096;

cudaStream_t AsStream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

class CudaEvent : public DeviceEvent {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  absl::Status Synchronize() override {
    return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }
  // cudaErrorNotReady: still pending; success or any error: happened.
  bool Done() override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  cudaEvent_t event() const { return event_; }

 private:
  const cudaEvent_t event_;
};

absl::StatusOr<CudaEvent*> AsCudaEvent(DeviceEvent* event) {
  auto* cuda_event = dynamic_cast<CudaEvent*>(event);
  if (cuda_event == nullptr) {
    return absl::InvalidArgumentError(
        "event was not recorded by a CUDA device backend");
  }
  return cuda_event;
}

absl::StatusOr<cudaDeviceProp> DeviceProperties(int ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device (", CudaErrorText(err), ")"));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        "no CUDA device (cudaGetDeviceCount found none)");
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", ordinal, " (", count, " present: 0..",
                     count - 1, ")"));
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device (cudaGetDeviceProperties: ", CudaErrorText(err), ")"));
  }
  return prop;
}

cudaMemcpyKind MemcpyKind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kH2D:
      return cudaMemcpyHostToDevice;
    case CopyKind::kD2H:
      return cudaMemcpyDeviceToHost;
    default:
      return cudaMemcpyDeviceToDevice;
  }
}

// Splits [ptr, ptr + bytes) into pieces of at most 1 GiB whose inner
// boundaries are page-aligned, so no page is registered twice.
std::vector<std::pair<std::byte*, uint64_t>> RegisterChunks(void* ptr,
                                                            uint64_t bytes) {
  std::vector<std::pair<std::byte*, uint64_t>> chunks;
  auto* p = static_cast<std::byte*>(ptr);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  while (at < end) {
    uintptr_t next = (at + kRegisterChunkBytes) & ~(kPageBytes - 1);
    next = std::min<uintptr_t>(next, end);
    chunks.emplace_back(p + (at - reinterpret_cast<uintptr_t>(p)), next - at);
    at = next;
  }
  return chunks;
}

}  // namespace

absl::StatusOr<std::string> ProbeCudaDevice(int ordinal) {
  STRATA_ASSIGN_OR_RETURN(cudaDeviceProp prop, DeviceProperties(ordinal));
  const uint64_t gib = (prop.totalGlobalMem + (uint64_t{1} << 29)) >> 30;
  return absl::StrCat(prop.name, ", ", gib, " GiB, compute ", prop.major, ".",
                      prop.minor);
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(
    const DeviceOptions& options) {
  if (options.copy_chunk_bytes == 0) {
    return absl::InvalidArgumentError("copy_chunk_bytes must be > 0");
  }
  STRATA_ASSIGN_OR_RETURN(cudaDeviceProp prop,
                          DeviceProperties(options.cuda_device));
  std::unique_ptr<CudaDevice> device(new CudaDevice(options, prop.name));
  STRATA_RETURN_IF_ERROR(device->Init());
  return device;
}

CudaDevice::CudaDevice(const DeviceOptions& options, std::string device_name)
    : options_(options), device_name_(std::move(device_name)) {}

absl::Status CudaDevice::Init() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&h2d_stream_, cudaStreamNonBlocking));
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&d2h_stream_, cudaStreamNonBlocking));
  // The batch calls need concurrent managed access on every GPU.
  int count = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  batched_ = count > 0;
  for (int d = 0; d < count; ++d) {
    int concurrent = 0;
    STRATA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
        &concurrent, cudaDevAttrConcurrentManagedAccess, d));
    batched_ = batched_ && concurrent != 0;
  }
  return absl::OkStatus();
}

CudaDevice::~CudaDevice() {
  // Errors are ignored: there is no one left to report them to.
  (void)SetDevice();
  for (cudaStream_t stream : {h2d_stream_, d2h_stream_}) {
    if (stream == nullptr) continue;
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  MutexLock lock(&mu_);
  for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
  if (arena_ != nullptr) cudaFree(arena_);
  if (managed_ != nullptr) cudaFree(managed_);
  cudaGetLastError();
}

absl::Status CudaDevice::SetDevice() const {
  return CudaStatus(cudaSetDevice(options_.cuda_device), "cudaSetDevice");
}

absl::StatusOr<std::byte*> CudaDevice::ReserveArena(uint64_t bytes) {
  STRATA_RETURN_IF_ERROR(SetDevice());
  MutexLock lock(&mu_);
  if (arena_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the device arena on ", name(), " is already reserved"));
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError("device arena size must be > 0");
  }
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (bytes > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device budget ", bytes, " bytes exceeds free device memory ",
        free_bytes, " bytes on ", device_name_, ": lower --device-budget"));
  }
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cudaMalloc of the device budget (", bytes, " bytes) failed on ",
        device_name_, " (", CudaErrorText(err), "): lower --device-budget"));
  }
  STRATA_RETURN_IF_ERROR(CudaStatus(err, "cudaMalloc"));
  arena_ = p;
  return static_cast<std::byte*>(p);
}

absl::StatusOr<cudaEvent_t> CudaDevice::TakeEvent() {
  {
    MutexLock lock(&mu_);
    if (!free_events_.empty()) {
      cudaEvent_t event = free_events_.back();
      free_events_.pop_back();
      return event;
    }
  }
  cudaEvent_t event = nullptr;
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void CudaDevice::ReturnEvent(cudaEvent_t event) {
  MutexLock lock(&mu_);
  free_events_.push_back(event);
}

absl::Status CudaDevice::StreamAfter(cudaStream_t stream, DeviceEvent* after) {
  if (after == nullptr) return absl::OkStatus();
  STRATA_ASSIGN_OR_RETURN(CudaEvent * event, AsCudaEvent(after));
  return CudaStatus(cudaStreamWaitEvent(stream, event->event(), 0),
                    "cudaStreamWaitEvent(stream, event->event(), 0)");
}

absl::Status CudaDevice::WaitForStream(cudaStream_t stream) {
  STRATA_ASSIGN_OR_RETURN(cudaEvent_t done, TakeEvent());
  absl::Status status =
      CudaStatus(cudaEventRecord(done, stream), "cudaEventRecord");
  if (status.ok()) {
    status = CudaStatus(cudaEventSynchronize(done), "cudaEventSynchronize");
  }
  ReturnEvent(done);
  return status;
}

absl::Status CudaDevice::Copy(CopyKind kind, void* dst, const void* src,
                              uint64_t bytes, DeviceEvent* after) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError("null pointer passed to Copy");
  }
  STRATA_RETURN_IF_ERROR(SetDevice());
  cudaStream_t stream = kind == CopyKind::kD2H ? d2h_stream_ : h2d_stream_;
  STRATA_RETURN_IF_ERROR(StreamAfter(stream, after));
  cudaEvent_t events[2] = {nullptr, nullptr};
  absl::StatusOr<cudaEvent_t> first = TakeEvent();
  if (!first.ok()) return first.status();
  events[0] = *first;
  absl::StatusOr<cudaEvent_t> second = TakeEvent();
  if (!second.ok()) {
    ReturnEvent(events[0]);
    return second.status();
  }
  events[1] = *second;
  absl::Status status =
      CopyChunks(kind, stream, static_cast<std::byte*>(dst),
                 static_cast<const std::byte*>(src), bytes, events);
  ReturnEvent(events[0]);
  ReturnEvent(events[1]);
  return status;
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> CudaDevice::CopyAsync(
    CopyKind kind, void* dst, const void* src, uint64_t bytes,
    DeviceEvent* after) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return absl::InvalidArgumentError("null pointer passed to CopyAsync");
  }
  STRATA_RETURN_IF_ERROR(SetDevice());
  cudaStream_t stream = kind == CopyKind::kD2H ? d2h_stream_ : h2d_stream_;
  STRATA_RETURN_IF_ERROR(StreamAfter(stream, after));
  const cudaMemcpyKind memcpy_kind = MemcpyKind(kind);
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Chunks keep the engine's stream interleaving with other copies queued
  // behind them no worse than Copy's.
  for (uint64_t offset = 0; offset < bytes;) {
    const uint64_t n = std::min(options_.copy_chunk_bytes, bytes - offset);
    const cudaError_t err =
        cudaMemcpyAsync(d + offset, s + offset, n, memcpy_kind, stream);
    if (err != cudaSuccess) {
      // Chunks already queued may still read the source: let them end.
      cudaStreamSynchronize(stream);
      return CudaStatus(err, "cudaMemcpyAsync");
    }
    offset += n;
  }
  absl::StatusOr<std::shared_ptr<DeviceEvent>> event = RecordEvent(stream);
  // Without an event nobody could wait for the copy: end it before saying so.
  if (!event.ok()) cudaStreamSynchronize(stream);
  return event;
}

absl::StatusOr<double> CudaDevice::TimeCopies(CopyKind kind, void* dst,
                                              const void* src, uint64_t bytes,
                                              uint64_t repeats) {
  STRATA_RETURN_IF_ERROR(SetDevice());
  cudaStream_t stream = kind == CopyKind::kD2H ? d2h_stream_ : h2d_stream_;
  const cudaMemcpyKind memcpy_kind = MemcpyKind(kind);
  cudaEvent_t start = nullptr, stop = nullptr;  // timing events
  STRATA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  absl::Status status = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate");
  if (status.ok())
    status = CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
  for (uint64_t r = 0; r < repeats && status.ok(); ++r) {
    status = CudaStatus(cudaMemcpyAsync(dst, src, bytes, memcpy_kind, stream),
                        "cudaMemcpyAsync");
  }
  if (status.ok())
    status = CudaStatus(cudaEventRecord(stop, stream), "cudaEventRecord");
  if (status.ok()) {
    status = CudaStatus(cudaEventSynchronize(stop), "cudaEventSynchronize");
  }
  float ms = 0;
  if (status.ok()) {
    status = CudaStatus(cudaEventElapsedTime(&ms, start, stop),
                        "cudaEventElapsedTime");
  }
  if (!status.ok()) cudaStreamSynchronize(stream);  // no copy outlives us
  cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  STRATA_RETURN_IF_ERROR(status);
  return ms * 1e-3;
}

absl::Status CudaDevice::CopyChunks(CopyKind kind, cudaStream_t stream,
                                    std::byte* dst, const std::byte* src,
                                    uint64_t bytes,
                                    cudaEvent_t const events[2]) {
  const cudaMemcpyKind memcpy_kind = MemcpyKind(kind);
  absl::Status status;
  uint64_t chunk = 0;
  for (uint64_t offset = 0; offset < bytes && status.ok(); ++chunk) {
    const uint64_t n = std::min(options_.copy_chunk_bytes, bytes - offset);
    cudaEvent_t slot = events[chunk % 2];
    // The slot's event marks this call's chunk before last: once it has
    // completed, at most one of our chunks is in flight.
    if (chunk >= 2) {
      status = CudaStatus(cudaEventSynchronize(slot), "cudaEventSynchronize");
    }
    if (status.ok()) {
      status = CudaStatus(
          cudaMemcpyAsync(dst + offset, src + offset, n, memcpy_kind, stream),
          "cudaMemcpyAsync");
    }
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(slot, stream), "cudaEventRecord");
    }
    offset += n;
  }
  if (!status.ok()) {
    // Do not return while a chunk may still read or write the caller's
    // buffers; this waits for other callers' chunks too (error path only).
    cudaStreamSynchronize(stream);
    cudaGetLastError();
    return status;
  }
  // The stream runs in order: our last chunk's event completes after all of
  // our earlier chunks.
  return CudaStatus(cudaEventSynchronize(events[(chunk - 1) % 2]),
                    "cudaEventSynchronize");
}

absl::StatusOr<std::shared_ptr<DeviceEvent>> CudaDevice::RecordEvent(
    void* stream) {
  STRATA_RETURN_IF_ERROR(SetDevice());
  cudaEvent_t event = nullptr;
  STRATA_CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  auto owned = std::make_shared<CudaEvent>(event);
  STRATA_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, AsStream(stream)));
  return std::shared_ptr<DeviceEvent>(std::move(owned));
}

absl::Status CudaDevice::StreamWait(void* stream, DeviceEvent& event) {
  STRATA_ASSIGN_OR_RETURN(CudaEvent * cuda_event, AsCudaEvent(&event));
  STRATA_RETURN_IF_ERROR(SetDevice());
  return CudaStatus(
      cudaStreamWaitEvent(AsStream(stream), cuda_event->event(), 0),
      "cudaStreamWaitEvent");
}

absl::Status CudaDevice::RegisterHost(void* ptr, uint64_t bytes) {
  if (ptr == nullptr || bytes == 0) {
    return absl::InvalidArgumentError("RegisterHost needs a non-empty range");
  }
  STRATA_RETURN_IF_ERROR(SetDevice());
  const auto chunks = RegisterChunks(ptr, bytes);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const cudaError_t err = cudaHostRegister(chunks[i].first, chunks[i].second,
                                             cudaHostRegisterDefault);
    if (err == cudaSuccess) continue;
    absl::Status status = CudaStatus(err, "cudaHostRegister");
    for (size_t j = 0; j < i; ++j) cudaHostUnregister(chunks[j].first);
    cudaGetLastError();
    return status;
  }
  return absl::OkStatus();
}

absl::Status CudaDevice::UnregisterHost(void* ptr, uint64_t bytes) {
  if (ptr == nullptr || bytes == 0) {
    return absl::InvalidArgumentError("UnregisterHost needs a non-empty range");
  }
  STRATA_RETURN_IF_ERROR(SetDevice());
  absl::Status status;
  for (const auto& [chunk, size] : RegisterChunks(ptr, bytes)) {
    status.Update(CudaStatus(cudaHostUnregister(chunk), "cudaHostUnregister"));
  }
  return status;
}

absl::StatusOr<DeviceMemInfo> CudaDevice::GetMemInfo() {
  STRATA_RETURN_IF_ERROR(SetDevice());
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  STRATA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemInfo{free_bytes, total_bytes};
}

}  // namespace strata
